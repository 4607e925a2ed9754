"""The contention profile derived from a graph's weights, pinned by hand (issue 34 item 4;
``make mutate MODULE=model/contention.py``): an operator with more than one downstream
operator, bytes before tuples, a link type that one non-FORWARD link makes HASH whatever its
order, streams inside one operator left out, a cycle keeping compute only, and scaling."""

from __future__ import annotations

import numpy as np
import pytest

from streamsched.errors import InputError
from streamsched.model import TaskGraph
from streamsched.model.contention import ContentionProfile, profile_from_graph


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
