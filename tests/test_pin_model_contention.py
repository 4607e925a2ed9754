"""The contention profile derived from a graph's weights, pinned by hand (issue 34 item 4;
``make mutate MODULE=model/contention.py``): an operator with more than one downstream
operator, bytes before tuples, a link type that one non-FORWARD link makes HASH whatever its
order, streams inside one operator left out, a cycle keeping compute only, and scaling; CAPSys's
profile JSON read and checked (every refusal word for word), and the task graph of a profile
(FORWARD and HASH edges by hand)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamsched.errors import InputError
from streamsched.model import TaskGraph
from streamsched.model.contention import (PROFILES, ContentionProfile, builtin_profile, caps_records, check_profile,
                                          graph_from_profile, in_operator_order, load_profile, profile_from_graph,
                                          read_caps_profile, with_profile)
from streamsched.model.taskgraph import MAX_VALUE


def derived(names, task_operator, load, edges, bytes_rate=None) -> ContentionProfile:
    src, dst, rate = zip(*edges) if edges else ((), (), ())
    return profile_from_graph(TaskGraph.build("g", names, task_operator, load, list(src), list(dst), list(rate),
                                              bytes_rate=bytes_rate, merge_duplicates=False))


def test_an_operator_with_two_downstream_operators():
    """A (tasks 0, 1; loads 1 and 3) -> B (2, 3) one to one (3 tuples/s each) and -> C (4) (a0 5,
    a1 1); a0 -> a1 inside A (100, not a link). A: compute (1 + 3) / 2 = 2; network: its tasks
    send 8 and 4, mean 6, charged once per link over its 2 links: 3. A -> C is not one to one, so
    A's links are HASH. B and C send nothing: network 0; state is not measured: 0."""
    profile = derived(("A", "B", "C"), [0, 0, 1, 1, 2], [1.0, 3.0, 2.0, 2.0, 5.0],
                      [(0, 2, 3.0), (1, 3, 3.0), (0, 4, 5.0), (1, 4, 1.0), (0, 1, 100.0)])
    assert profile.cost.tolist() == [[2.0, 0.0, 3.0], [2.0, 0.0, 0.0], [5.0, 0.0, 0.0]]
    assert profile.downstream == ((1, 2), (), ()) and profile.outbound == ("HASH", "", "")
    assert profile.parallelism == (2, 2, 1) and profile.measured == ("compute", "network")
    assert profile.links() == [(0, 1, "HASH"), (0, 2, "HASH")]
    assert profile.upstream == ((), (0,), (0,))


def test_hash_stays_whatever_the_order_of_the_links():
    """The same graph with C numbered before B: the HASH link (to C) comes first, the one-to-one
    link (to B) after; A's links are still HASH. Only one-to-one links between operators of equal
    parallelism make FORWARD."""
    profile = derived(("A", "C", "B"), [0, 0, 1, 2, 2], [1.0, 3.0, 5.0, 2.0, 2.0],
                      [(0, 3, 3.0), (1, 4, 3.0), (0, 2, 5.0), (1, 2, 1.0)])
    assert profile.outbound == ("HASH", "", "") and profile.downstream == ((1, 2), (), ())
    forward = derived(("A", "B"), [0, 0, 1, 1], [1.0, 1.0, 1.0, 1.0], [(0, 3, 2.0), (1, 2, 4.0)])
    assert forward.outbound == ("FORWARD", "") and forward.cost[0].tolist() == [1.0, 0.0, 3.0]
    unequal = derived(("A", "B"), [0, 0, 1, 1, 1], [1.0] * 5, [(0, 2, 2.0), (1, 3, 2.0)])
    assert unequal.outbound == ("HASH", "")
    fan = derived(("A", "B"), [0, 0, 1, 1], [1.0] * 4, [(0, 2, 2.0), (0, 3, 2.0), (1, 3, 2.0)])
    assert fan.outbound == ("HASH", "") and fan.cost[0, 2] == 3.0  # a0 sends 4, a1 2: mean 3, one link


def test_bytes_before_tuples():
    """With bytes per second on the edges the network cost is in bytes: a0 sends 1000 and a1
    3000 bytes/s to B, mean 2000 (the tuple rates, 1 and 1, are not used)."""
    profile = derived(("A", "B"), [0, 0, 1], [1.0, 1.0, 1.0], [(0, 2, 1.0), (1, 2, 1.0)],
                      bytes_rate=[1000.0, 3000.0])
    assert profile.cost[:, 2].tolist() == [2000.0, 0.0]


def test_a_cycle_of_operators_keeps_compute_only():
    """A -> B -> A (Storm allows it): CAPS's model needs a DAG; compute kept, no links."""
    profile = derived(("A", "B"), [0, 1], [2.0, 4.0], [(0, 1, 1.0), (1, 0, 1.0)])
    assert profile.downstream == ((), ()) and profile.outbound == ("", "") and profile.measured == ("compute",)
    assert profile.cost[:, 0].tolist() == [2.0, 4.0]


def test_scaled_gives_each_operator_its_floor_share_and_the_last_the_rest():
    """(2, 3, 5) to 20 tasks: floor(2/10 x 20) = 4, floor(3/10 x 20) = 6, last 10; to 4: 1 (at
    least one), 1, and the last 2; to 2: 1, 1 leave the last none: one line."""
    profile = ContentionProfile(("a", "b", "c"), (2, 3, 5), np.zeros((3, 3)), ("HASH", "HASH", ""), ((1,), (2,), ()))
    assert profile.scaled(20).parallelism == (4, 6, 10) and profile.scaled(4).parallelism == (1, 1, 2)
    assert profile.scaled(7).parallelism == (1, 2, 4)
    with pytest.raises(InputError, match="cannot scale 10 tasks to 2"):
        profile.scaled(2)


@pytest.mark.parametrize("edges, cyclic", [
    ([(0, 1), (1, 2), (2, 1)], True),  # B <-> C, reached from A
    ([(0, 1), (2, 3), (3, 2)], True),  # C <-> D, apart from A -> B
    ([(0, 1), (0, 2), (1, 3), (2, 3)], False),  # a diamond: D reached twice, no cycle
])
def test_a_cycle_anywhere_keeps_compute_only_and_a_diamond_is_no_cycle(edges, cyclic):
    """One task per operator A, B, C, D; the edges between them."""
    src, dst = zip(*edges)
    profile = derived(("A", "B", "C", "D"), [0, 1, 2, 3], [1.0] * 4, [(s, d, 1.0) for s, d in edges])
    assert (profile.measured == ("compute",)) == cyclic
    if not cyclic:
        assert profile.downstream == ((1, 2), (3,), (3,), ())


def test_two_one_to_one_links_from_one_operator_are_forward():
    """A (2) -> B (2) and A -> C (2), each one to one: both links FORWARD; each of A's tasks sends
    2 + 4 = 6 in all, charged over 2 links: 3."""
    profile = derived(("A", "B", "C"), [0, 0, 1, 1, 2, 2], [1.0] * 6,
                      [(0, 2, 2.0), (1, 3, 2.0), (0, 4, 4.0), (1, 5, 4.0)])
    assert profile.outbound == ("FORWARD", "", "") and profile.cost[0, 2] == 3.0


def test_an_operator_without_tasks_gets_zero_costs():
    """A (2 tasks) -> B (1), C without tasks: C's row is zeros; each task's costs are its operator's."""
    profile = derived(("A", "B", "C"), [0, 0, 1], [1.0, 3.0, 4.0], [(0, 2, 2.0), (1, 2, 6.0)])
    assert profile.parallelism == (2, 1, 0)
    assert profile.cost.tolist() == [[2.0, 0.0, 4.0], [4.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert profile.task_costs(np.array([1, 0])).tolist() == [[4.0, 0.0, 0.0], [2.0, 0.0, 4.0]]


def test_scaling_may_leave_the_last_operator_one_task():
    profile = ContentionProfile(("a", "b", "c"), (2, 3, 5), np.zeros((3, 3)), ("HASH", "HASH", ""), ((1,), (2,), ()))
    assert profile.scaled(3).parallelism == (1, 1, 1)


# ------------------------------------------------------------------ CAPSys's profile JSON, read and checked
def op(key, name, p, compute, state, network, kind, down, up):
    return {"id": key, "name": name, "parallelism": p, "compute": compute, "state": state, "network": network,
            "outboundtype": kind, "downNode": down, "upNode": up}


def chain():
    """src (3 tasks) -FORWARD-> mid (2) -HASH-> sink (1), in CAPSys's JSON."""
    return [op("s", "src", 3, 1.0, 0.0, 6.0, "FORWARD", ["m"], []),
            op("m", "mid", 2, 2.0, 5.0, 4.0, "HASH", ["k"], ["s"]),
            op("k", "sink", 1, 3.0, 1.0, 0.0, "", [], ["m"])]


def edited(change):
    data = chain()
    change(data)
    return data


@pytest.mark.parametrize("data, message", [
    ([], "p.json: expected a non-empty list of operators"),
    ({"s": chain()[0]}, "p.json: expected a non-empty list of operators"),
    (["src"], "p.json: [0]: expected an object"),
    (edited(lambda d: d[2].pop("upNode")), "p.json: [2]: missing field 'upNode'"),
    (edited(lambda d: d[1].update(id=5)), "p.json: [1].id: expected a non-empty string, got 5"),
    (edited(lambda d: d[1].update(id="")), "p.json: [1].id: expected a non-empty string, got ''"),
    (edited(lambda d: d[2].update(id="s")), "p.json: [2].id: operator id 's' listed twice"),
    (edited(lambda d: d[1].update(name=7)), "p.json: [1] (id 'm').name: expected a non-empty string"),
    (edited(lambda d: d[1].update(name="")), "p.json: [1] (id 'm').name: expected a non-empty string"),
    (edited(lambda d: d[0].update(parallelism=2.5)), "p.json: [0] (id 's').parallelism: expected an integer >= 1, got 2.5"),
    (edited(lambda d: d[0].update(parallelism=True)), "p.json: [0] (id 's').parallelism: expected an integer >= 1, got True"),
    (edited(lambda d: d[0].update(parallelism="3")), "p.json: [0] (id 's').parallelism: expected an integer >= 1, got '3'"),
    (edited(lambda d: d[0].update(parallelism=0)), "p.json: [0] (id 's').parallelism: expected an integer >= 1, got 0"),
    (edited(lambda d: d[1].update(state=float("nan"))), "p.json: [1] (id 'm').state: expected a number, got nan"),
    (edited(lambda d: d[1].update(compute=True)), "p.json: [1] (id 'm').compute: expected a number, got True"),
    (edited(lambda d: d[1].update(network="4")), "p.json: [1] (id 'm').network: expected a number, got '4'"),
    (edited(lambda d: d[1].update(network=-0.5)), "p.json: [1] (id 'm').network: cost -0.5 is negative"),
    (edited(lambda d: d[1].update(downNode="k")), "p.json: [1] (id 'm').downNode: expected a list of operator ids"),
    (edited(lambda d: d[1].update(upNode=["x"])), "p.json: [1] (id 'm').upNode: unknown operator id 'x'"),
    (edited(lambda d: d[1].update(outboundtype="BROADCAST")),
     "p.json: [1] (id 'm').outboundtype: 'BROADCAST' is not one of FORWARD, REBALANCE, HASH"),
    (edited(lambda d: d[2].update(upNode=[])), "p.json: [2] (id 'k').upNode: lacks 'm', whose downNode lists it"),
    (edited(lambda d: d[2].update(upNode=["m", "s"])), "p.json: [0] (id 's').downNode: lacks 'k', whose upNode lists it"),
    (edited(lambda d: d[2].update(name="mid")), "p.json: operator name 'mid' listed twice"),
    (edited(lambda d: d[0].update(compute=2e15)),
     "p.json: operator 'src': compute is 2e+15; must be a number in [0, 1e+15]"),
    (edited(lambda d: (d[2].update(downNode=["s"], outboundtype="HASH"), d[0].update(upNode=["k"]))),
     "p.json: the operators form a cycle (src -> mid -> sink -> src)"),
])
def test_a_bad_caps_profile_is_one_line_naming_the_file_entry_and_field(data, message):
    """Each of the reader's refusals, word for word: the file, the entry's index and id, the field."""
    with pytest.raises(InputError) as error:
        read_caps_profile(data, "p.json")
    assert str(error.value) == message


def test_a_name_listed_twice_is_named_even_when_it_is_not_the_first():
    data = chain() + [op("x", "sink", 1, 0.0, 0.0, 0.0, "", [], [])]
    with pytest.raises(InputError, match=r"^p\.json: operator name 'sink' listed twice$"):
        read_caps_profile(data, "p.json")


def test_a_caps_profile_reads_to_its_hand_written_arrays_read_only():
    """The chain read back: names, parallelism, costs as floats, a sink's outboundtype dropped
    (CAPS reads it only where there is a downstream operator), ``downstream`` by index."""
    data = edited(lambda d: d[2].update(outboundtype="FORWARD", compute=3))
    profile = read_caps_profile(data, "p.json")
    assert profile.operator_names == ("src", "mid", "sink") and profile.parallelism == (3, 2, 1)
    assert profile.cost.dtype == np.float64
    assert profile.cost.tolist() == [[1.0, 0.0, 6.0], [2.0, 5.0, 4.0], [3.0, 1.0, 0.0]]
    assert profile.outbound == ("FORWARD", "HASH", "") and profile.downstream == ((1,), (2,), ())
    assert not profile.cost.flags.writeable
    assert profile.cost[0, 0] == 1.0 and caps_records(profile)[2]["outboundtype"] == ""


def profile_of(names=("a", "b"), parallelism=(1, 1), cost=None, outbound=("HASH", ""), downstream=((1,), ())):
    cost = np.ones((len(names), 3)) if cost is None else np.asarray(cost, dtype=np.float64)
    return ContentionProfile(tuple(names), tuple(parallelism), cost, tuple(outbound), tuple(downstream))


@pytest.mark.parametrize("profile, message", [
    (profile_of(cost=np.ones((2, 2))), "where: operator arrays differ in length"),
    (profile_of(parallelism=(1, 1, 1)), "where: operator arrays differ in length"),
    (profile_of(outbound=("HASH",)), "where: operator arrays differ in length"),
    (profile_of(downstream=((1,),)), "where: operator arrays differ in length"),
    (profile_of(parallelism=(1, 0)), "where: operator 'b': parallelism 0 must be >= 1"),
    (profile_of(cost=[[1, 1, 1], [1, -2, 1]]), "where: operator 'b': state is -2; must be a number in [0, 1e+15]"),
    (profile_of(cost=[[1, 1, float("inf")], [1, 1, 1]]), "where: operator 'a': network is inf; must be a number in [0, 1e+15]"),
    (profile_of(downstream=((2,), ())), "where: operator 'a': downstream operator index 2 out of range"),
    (profile_of(downstream=((-1,), ())), "where: operator 'a': downstream operator index -1 out of range"),
    (profile_of(outbound=("ALL", "")), "where: operator 'a': outbound type 'ALL' is not one of FORWARD, REBALANCE, HASH"),
    (profile_of(outbound=("HASH", "FORWARD"), downstream=((1,), (0,))), "where: the operators form a cycle (a -> b -> a)"),
])
def test_check_profile_refuses_in_one_line_naming_where_and_the_operator(profile, message):
    with pytest.raises(InputError) as error:
        check_profile(profile, "where")
    assert str(error.value) == message


def test_check_profile_admits_costs_up_to_the_limit_and_a_sink_without_a_link_type():
    check_profile(profile_of(cost=[[MAX_VALUE, 0, MAX_VALUE], [0, MAX_VALUE, 0]], outbound=("HASH", "whatever")), "w")


def test_check_profile_names_where_for_too_many_operators_and_tasks(monkeypatch):
    monkeypatch.setenv("STREAMSCHED_MAX_OPERATORS", "1")
    with pytest.raises(InputError, match=r"^where: 2 operators exceed the limit of 1 "):
        check_profile(profile_of(), "where")
    monkeypatch.delenv("STREAMSCHED_MAX_OPERATORS")
    monkeypatch.setenv("STREAMSCHED_MAX_TASKS", "2")
    with pytest.raises(InputError, match=r"^where: 3 tasks exceed the limit of 2 "):
        check_profile(profile_of(parallelism=(2, 1)), "where")


# ------------------------------------------------------------------ the task graph of a profile
def test_forward_sends_task_i_to_i_mod_p_and_hash_to_every_task_an_equal_share():
    """src (3) -FORWARD-> mid (2): task i to mid's i mod 2 (0, 1, 0), all of src's network (6)
    each; mid (2) -HASH-> sink (1): to the one sink task, network 4 / 1. Load 1 per task; bytes
    equal rates; the graph keeps its name and profile."""
    profile = read_caps_profile(chain(), "p.json")
    graph = graph_from_profile(profile, "chain")
    assert graph.name == "chain" and graph.contention is profile
    assert graph.task_operator.tolist() == [0, 0, 0, 1, 1, 2] and graph.load.tolist() == [1.0] * 6
    edges = sorted(zip(graph.src.tolist(), graph.dst.tolist(), graph.rate.tolist(), graph.bytes_rate.tolist()))
    assert edges == [(0, 3, 6.0, 6.0), (1, 4, 6.0, 6.0), (2, 3, 6.0, 6.0), (3, 5, 4.0, 4.0), (4, 5, 4.0, 4.0)]
    rebalance = edited(lambda d: (d[0].update(outboundtype="REBALANCE"), d[1].update(parallelism=3)))
    graph = graph_from_profile(read_caps_profile(rebalance, "p.json"), "r")
    first = sorted((s, t, r) for s, t, r in zip(graph.src.tolist(), graph.dst.tolist(), graph.rate.tolist()) if s < 3)
    assert first == [(s, t, 2.0) for s in range(3) for t in range(3, 6)]


def test_a_profile_without_links_is_a_graph_without_edges():
    profile = read_caps_profile([op("a", "A", 2, 1.0, 0.0, 0.0, "", [], []), op("b", "B", 1, 1.0, 0.0, 0.0, "", [], [])],
                                "p.json")
    graph = graph_from_profile(profile, "apart")
    assert graph.n_tasks == 3 and graph.src.size == 0 and graph.dst.size == 0 and graph.rate.size == 0


def test_graph_from_profile_names_the_profile_or_where_in_its_errors():
    bad = profile_of(parallelism=(1, 0))
    with pytest.raises(InputError, match=r"^profile 'g': operator 'b': parallelism 0"):
        graph_from_profile(bad, "g")
    with pytest.raises(InputError, match=r"^f\.json: operator 'b': parallelism 0"):
        graph_from_profile(bad, "g", "f.json")


def test_with_profile_refuses_other_operators_or_counts_naming_the_graph():
    graph = graph_from_profile(read_caps_profile(chain(), "p.json"), "chain")
    other = read_caps_profile(edited(lambda d: d[0].update(parallelism=4)), "p.json")
    with pytest.raises(InputError, match=r"^graph 'chain': the contention profile's parallelism differs"):
        with_profile(graph, other)
    renamed = read_caps_profile(edited(lambda d: d[2].update(name="out")), "p.json")
    with pytest.raises(InputError, match=r"^g\.json: the contention profile's operators differ from the graph's$"):
        with_profile(graph, renamed, "g.json")
    bad = profile_of(names=graph.operator_names, parallelism=(3, 2, 1), cost=[[1, 1, 1], [1, 1, 1], [1, -1, 1]],
                     outbound=("FORWARD", "HASH", ""), downstream=((1,), (2,), ()))
    with pytest.raises(InputError, match=r"^graph 'chain': operator 'sink': state is -1"):
        with_profile(graph, bad)


def test_in_operator_order_refuses_other_operators_in_one_line():
    profile = read_caps_profile(chain(), "p.json")
    assert in_operator_order(profile, ("sink", "src", "mid"), "w").downstream == ((), (2,), (0,))
    with pytest.raises(InputError, match=r"^w: the contention profile's operators differ from the graph's$"):
        in_operator_order(profile, ("sink", "src", "other"), "w")


def test_a_profile_file_and_an_unknown_builtin_are_named_in_their_errors(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(edited(lambda d: d[1].update(state=-1))))
    with pytest.raises(InputError) as error:
        load_profile(path)
    assert str(error.value) == f"{path}: [1] (id 'm').state: cost -1 is negative"
    with pytest.raises(InputError) as error:
        builtin_profile("Q9")
    assert str(error.value) == f"unknown CAPSys profile 'Q9' (known: {', '.join(PROFILES)})"
    assert str(error.value).startswith("unknown CAPSys profile 'Q9' (known: Q1, Q1_updated, Q2, ")


def test_bytes_are_used_even_when_they_total_less_than_one_per_second():
    """0.2 and 0.3 bytes/s (tuples 1 and 1): the network cost is in bytes, mean 0.25."""
    profile = derived(("A", "B"), [0, 0, 1], [1.0, 1.0, 1.0], [(0, 2, 1.0), (1, 2, 1.0)], bytes_rate=[0.2, 0.3])
    assert profile.cost[:, 2].tolist() == [0.25, 0.0]
