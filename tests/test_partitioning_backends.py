"""Partitioner back-ends (METIS, KaHIP) and hard part capacities (fit_parts)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from streamsched.errors import InfeasibleError, InputError
from streamsched.partitioning import fit_parts, partition
from streamsched.partitioning import backends
from streamsched.partitioning.backends import WEIGHT_LEVELS, WEIGHT_SUM_LIMIT, CSRGraph, cut_weight, integer_weights
from streamsched.partitioning.balance import _rows_of


def symmetric(n: int, edges: list[tuple[int, int, float]]) -> sp.csr_matrix:
    rows, cols, vals = zip(*edges)
    a = sp.coo_matrix((vals, (rows, cols)), shape=(n, n))
    return (a + a.T).tocsr()


def two_cliques(size=4, heavy=10.0, light=1.0) -> sp.csr_matrix:
    edges = [(b + i, b + j, heavy) for b in (0, size) for i, j in itertools.combinations(range(size), 2)]
    return symmetric(2 * size, edges + [(size - 1, size, light)])


def test_integer_weights_keep_small_integers_and_scale_floats():
    np.testing.assert_array_equal(integer_weights(np.array([1.0, 3.0, 0.0]), allow_zero=True), [1, 3, 0])
    np.testing.assert_array_equal(integer_weights(np.array([1.0, 3.0, 0.0]), allow_zero=False), [1, 3, 1])
    scaled = integer_weights(np.array([0.5, 0.25, 1e-12]), allow_zero=True)
    assert scaled[0] == WEIGHT_LEVELS and scaled[1] == WEIGHT_LEVELS // 2
    assert scaled[2] == 1  # positive weights never vanish


def test_scaled_weights_sum_within_32_bit_integers():
    """Measured rates of a 1M-task graph reach totals of 1e11-1e13: scaled to the top weight
    alone (2^20 each) five million of them would sum to ~5e12, far past 2^31."""
    rng = np.random.default_rng(0)
    values = rng.uniform(1e3, 1e7, 5_000_000)
    values[:10] = 1e-9  # tiny ones still round up to 1
    scaled = integer_weights(values, allow_zero=False)
    assert scaled.sum() <= WEIGHT_SUM_LIMIT < 2**31 and scaled.max() <= WEIGHT_LEVELS and scaled.min() >= 1
    # The ratios survive the scaling (to the integer resolution left).
    big = values > 1e6
    assert np.allclose(scaled[big] / scaled[big].max(), values[big] / values[big].max(), rtol=2e-2)


@pytest.mark.parametrize("backend", ["metis", "kahip", "kahip-fast"])
def test_partition_with_totals_past_32_bits(backend):
    """Two cliques of 150 vertices, 1e9 per edge inside (total 2.2e13), 1 between: every
    back-end (KaHIP's fast preset too) still finds the two cliques from the scaled weights."""
    a = two_cliques(size=150, heavy=1e9)
    parts = partition(a, 2, backend=backend, seed=0)
    assert cut_weight(a, parts) == 1.0


def test_cut_weight_counts_each_edge_once():
    a = two_cliques()
    assert cut_weight(a, np.array([0] * 4 + [1] * 4)) == 1.0
    assert cut_weight(a, np.zeros(8, np.int64)) == 0.0


@pytest.mark.parametrize("method", ["kway", "recursive", "auto"])
def test_metis_separates_two_cliques(method):
    parts = partition(two_cliques(), 2, method=method)
    assert cut_weight(two_cliques(), parts) == 1.0
    assert sorted(np.bincount(parts).tolist()) == [4, 4]


def test_kahip_separates_two_cliques():
    pytest.importorskip("kahip")
    parts = partition(two_cliques(), 2, backend="kahip")
    assert cut_weight(two_cliques(), parts) == 1.0


def test_same_seed_same_partition():
    rng = np.random.default_rng(0)
    edges = [(i, j, float(rng.integers(1, 9))) for i, j in itertools.combinations(range(40), 2) if rng.random() < 0.2]
    a = symmetric(40, edges)
    np.testing.assert_array_equal(partition(a, 5, seed=3), partition(a, 5, seed=3))


def test_target_fractions_size_the_parts():
    # a path of 8 unit vertices split 3:1 -> 6 and 2 vertices, cut 1
    a = symmetric(8, [(i, i + 1, 1.0) for i in range(7)])
    parts = partition(a, 2, target_fractions=[3, 1], imbalance=1.001, method="recursive")
    assert sorted(np.bincount(parts).tolist()) == [2, 6]
    assert cut_weight(a, parts) == 1.0


def test_part_capacity_is_hard():
    a = two_cliques()
    weights = np.array([3.0, 1, 1, 1, 1, 1, 1, 1])
    parts = partition(a, 2, vertex_weights=weights, part_capacity=np.array([5.0, 5.0]))
    assert np.bincount(parts, weights=weights).max() <= 5.0


def test_bad_arguments_name_the_field():
    a = two_cliques()
    with pytest.raises(InputError, match="backend 'chaco'"):
        partition(a, 2, backend="chaco")
    with pytest.raises(InputError, match="objective 'edges'"):
        partition(a, 2, objective="edges")
    with pytest.raises(InputError, match="3 target fractions for 2 parts"):
        partition(a, 2, target_fractions=[1, 1, 1])
    with pytest.raises(InputError, match="recursive bisection minimises the edge cut only"):
        partition(a, 2, method="recursive", objective="volume")
    with pytest.raises(InputError, match="only equal part sizes"):
        partition(a, 2, target_fractions=[3, 1], backend="kahip")


def test_trivial_cases():
    assert partition(sp.csr_matrix((0, 0)), 3).size == 0
    np.testing.assert_array_equal(partition(two_cliques(), 1), np.zeros(8))


def test_fit_parts_moves_the_vertex_with_the_best_gain():
    # path 0-1-2-3-4 (rates 5, 1, 5, 5); part 0 = {0, 1, 2} is one over its capacity 2.
    # Moving 2 to part 1 = {3, 4} gains 5 - 1 = +4 (cut becomes the 1-2 edge); moving 0 loses 5.
    a = symmetric(5, [(0, 1, 5.0), (1, 2, 1.0), (2, 3, 5.0), (3, 4, 5.0)])
    parts = fit_parts(a, np.array([0, 0, 0, 1, 1]), np.ones(5), np.array([2.0, 3.0]))
    np.testing.assert_array_equal(parts, [0, 0, 1, 1, 1])
    assert cut_weight(a, parts) == 1.0


def test_fit_parts_repacks_when_single_moves_are_stuck():
    # part 0 = {0, 1} holds 2 + 2 > 3; parts 1 = {2} (load 1, cap 2) and 2 = {3} (load 2, cap 3)
    # each have room 1, so no single move fits; the heaviest-first repack finds a packing
    a = symmetric(4, [(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0)])
    weights = np.array([2.0, 2.0, 1.0, 2.0])
    capacity = np.array([3.0, 2.0, 3.0])
    parts = fit_parts(a, np.array([0, 0, 1, 2]), weights, capacity)
    assert np.all(np.bincount(parts, weights=weights, minlength=3) <= capacity)
    np.testing.assert_array_equal(parts, [0, 2, 0, 1])


def test_fit_parts_reports_what_cannot_fit():
    a = symmetric(3, [(0, 1, 1.0), (1, 2, 1.0)])
    with pytest.raises(InfeasibleError, match="cannot pack item"):
        fit_parts(a, np.array([0, 0, 1]), np.full(3, 2.0), np.array([3.0, 3.0]))


def random_graph(n: int, degree: int, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), degree)
    cols = (rows + rng.integers(1, n, rows.size)) % n
    a = sp.coo_matrix((rng.uniform(1, 100, rows.size), (rows, cols)), shape=(n, n))
    return (a + a.T).tocsr()


def test_csr_graph_drops_self_loops_and_zeros_and_counts_the_cut():
    a = sp.csr_matrix(np.array([[2.0, 1.0, 0.0], [1.0, 0.0, 3.0], [0.0, 3.0, 0.0]]))
    a.data[a.data == 3.0] = 0.0  # an explicit zero entry
    graph = CSRGraph.from_matrix(a)
    np.testing.assert_array_equal(graph.xadj, [0, 1, 2, 2])
    np.testing.assert_array_equal(graph.adjncy, [1, 0])
    b = random_graph(60, 4)
    parts = np.arange(60) % 3
    assert CSRGraph.from_matrix(b).cut(parts) == pytest.approx(cut_weight(b, parts))


def test_volume_in_nested_levels_above_the_work_limit(monkeypatch):
    """Past VOLUME_DIRECT_WORK, k-way volume runs in levels of at most VOLUME_LEVEL_PARTS parts:
    every part used, balanced within the imbalance, the same for the same seed, and close to the
    one-call volume (here within 25 %)."""
    a = random_graph(3000, 4)
    direct = partition(a, 40, objective="volume", seed=1)
    monkeypatch.setattr(backends, "VOLUME_DIRECT_WORK", 1000)
    calls = []
    real = backends._metis
    monkeypatch.setattr(backends, "_metis", lambda k, *args, **kw: calls.append(k) or real(k, *args, **kw))
    nested = partition(a, 40, objective="volume", seed=1)
    assert max(calls) <= backends.VOLUME_LEVEL_PARTS and len(calls) > 1
    assert np.bincount(nested, minlength=40).min() > 0
    assert np.bincount(nested).max() <= 3000 / 40 * 1.03 + 1
    np.testing.assert_array_equal(nested, partition(a, 40, objective="volume", seed=1))
    assert volume(a, nested) <= 1.25 * volume(a, direct)


def volume(a: sp.csr_matrix, parts: np.ndarray) -> int:
    coo = a.tocoo()
    foreign = parts[coo.row] != parts[coo.col]
    return len(set(zip(coo.row[foreign].tolist(), parts[coo.col[foreign]].tolist())))


def test_fit_parts_rows_match_scipy_row_slicing():
    a = random_graph(50, 3, seed=2)
    members = np.array([3, 7, 8, 20, 49])
    row, col, data = _rows_of(a, members)
    coo = a[members].tocoo()
    np.testing.assert_array_equal(row, coo.row)
    np.testing.assert_array_equal(col, coo.col)
    np.testing.assert_array_equal(data, coo.data)
