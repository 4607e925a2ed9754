"""Topology files and the grouping semantics of TaskGraph.from_topology (hand-computed rates)."""

import numpy as np
import pytest

from streamsched.errors import InputError
from streamsched.model import Operator, Stream, TaskGraph, Topology


def rates_by_pair(graph: TaskGraph) -> dict[tuple[int, int], float]:
    return {(int(s), int(d)): float(r) for s, d, r in zip(graph.src, graph.dst, graph.rate)}


def two_operators(grouping: str, p_up=2, p_down=3, rate=60.0, **stream_kw) -> TaskGraph:
    ops = (Operator("up", p_up, "source", source_rate=rate, tuple_bytes=10),
           Operator("down", p_down, "sink", cpu_per_tuple=0.5))
    return TaskGraph.from_topology(Topology("t", ops, (Stream("up", "down", grouping, **stream_kw),)))


def test_shuffle_splits_each_upstream_task_evenly():
    g = two_operators("shuffle")  # each of 2 spout tasks emits 30/s, 10/s to each of 3 bolts
    assert g.n_tasks == 5 and g.n_edges == 6
    assert set(rates_by_pair(g).values()) == {10.0}
    np.testing.assert_allclose(g.bytes_rate, 100.0)
    np.testing.assert_allclose(g.load[2:], 0.5 * 20.0)  # each bolt processes 20/s


def test_fields_grouping_follows_zipf_key_skew():
    g = two_operators("fields", key_skew=1.0)
    # weights 1, 1/2, 1/3 normalised by 11/6 -> 6/11, 3/11, 2/11 of each task's 30/s
    r = rates_by_pair(g)
    for up in (0, 1):
        assert r[(up, 2)] == pytest.approx(30 * 6 / 11)
        assert r[(up, 3)] == pytest.approx(30 * 3 / 11)
        assert r[(up, 4)] == pytest.approx(30 * 2 / 11)
    assert g.load[2] == pytest.approx(0.5 * 60 * 6 / 11)


def test_fields_without_skew_is_uniform():
    assert set(rates_by_pair(two_operators("fields")).values()) == {10.0}


def test_global_sends_everything_to_lowest_task():
    r = rates_by_pair(two_operators("global"))
    assert r == {(0, 2): 30.0, (1, 2): 30.0}


def test_all_broadcasts_the_full_stream_to_every_task():
    g = two_operators("all")
    assert set(rates_by_pair(g).values()) == {30.0}
    assert g.total_rate == 180.0


def test_forward_connects_task_i_to_task_i():
    r = rates_by_pair(two_operators("forward", p_up=3, p_down=3, rate=90))
    assert r == {(0, 3): 30.0, (1, 4): 30.0, (2, 5): 30.0}


def test_forward_needs_equal_parallelism():
    with pytest.raises(InputError, match="forward needs equal parallelism"):
        two_operators("forward")


def test_selectivity_propagates_through_a_chain():
    ops = (Operator("s", 1, "source", source_rate=100), Operator("a", 2, selectivity=0.5),
           Operator("b", 1, "sink"))
    g = TaskGraph.from_topology(Topology("c", ops, (Stream("s", "a"), Stream("a", "b"))))
    r = rates_by_pair(g)
    assert r[(0, 1)] == r[(0, 2)] == 50.0
    assert r[(1, 3)] == r[(2, 3)] == 25.0  # 50/s in, selectivity 0.5


def test_pair_rate_overrides_propagation():
    g = two_operators("shuffle", pair_rate=1.0)
    assert set(rates_by_pair(g).values()) == {1.0}


def test_cycle_is_rejected():
    ops = (Operator("a", 1), Operator("b", 1))
    with pytest.raises(InputError, match="cycle"):
        Topology("c", ops, (Stream("a", "b"), Stream("b", "a")))


def test_unknown_operator_in_stream():
    with pytest.raises(InputError, match="unknown operator 'x'"):
        Topology("c", (Operator("a", 1),), (Stream("a", "x"),))


def test_yaml_round_trip(tmp_path):
    path = tmp_path / "topo.yaml"
    path.write_text(
        "name: demo\n"
        "operators:\n"
        "  - {name: spout, parallelism: 2, role: source, source_rate: 40}\n"
        "  - {name: count, parallelism: 4, role: sink}\n"
        "streams:\n"
        "  - {from: spout, to: count, grouping: fields, key_skew: 0.5}\n"
    )
    topo = Topology.load(path)
    assert topo.n_tasks == 6 and topo.streams[0].key_skew == 0.5
    again = Topology.from_dict(topo.to_dict())
    assert again == topo


@pytest.mark.parametrize("text, message", [
    ("operators: [\n", "invalid YAML"),
    ("operators:\n  - {name: a, parallelism: 0}\n", "operators[0].parallelism: must be >= 1"),
    ("operators:\n  - {name: a, role: spout}\n", "operators[0].role"),
    ("operators:\n  - {name: a, colour: red}\n", "operators[0].colour: unknown field"),
    ("operators:\n  - {name: a}\nstreams:\n  - {from: a, to: b}\n", "unknown operator 'b'"),
])
def test_bad_topology_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        Topology.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
