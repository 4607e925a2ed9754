"""`streamsched reproduce`: instances, cells, the local/Spark sweep runners and the summaries."""

import json
import sys

import numpy as np
import pytest

from streamsched.cli import main
from streamsched.evaluation import experiments as experiments_package
from streamsched.evaluation import paper_numbers as paper
from streamsched.evaluation.experiments import registry
from streamsched.evaluation.experiments.cells import Cell
from streamsched.workloads import fischer_chains
from streamsched.workloads import cluster as build_cluster, workload as build_graph
from streamsched.evaluation.experiments.runner import reproduce, run_cell, run_cells
from streamsched.metrics import evaluate
from streamsched.schedulers import available, get_scheduler

VOLATILE = ("wall_time_s",)


def stable(row):
    return {k: v for k, v in row.items() if k not in VOLATILE}


def test_fischer_chains_are_disjoint_seeded_paths():
    # fischer-metis-scheduler.txt Fig. 3: P chains of a spout and D bolts, one key per chain
    graph = fischer_chains("p", parallelism=5, depth=3, tuple_bytes=3072.0, seed=1)
    assert graph.n_tasks == 20 and graph.n_edges == 15
    assert np.bincount(graph.dst, minlength=20).tolist() == [0] * 5 + [1] * 15
    assert np.bincount(graph.src, minlength=20).tolist() == [1] * 15 + [0] * 5
    assert np.allclose(graph.bytes_rate, 3072.0 * 1000.0)
    again = fischer_chains("p", 5, 3, 3072.0, seed=1)
    assert again.dst.tolist() == graph.dst.tolist()
    assert fischer_chains("p", 5, 3, 3072.0, seed=2).dst.tolist() != graph.dst.tolist()


def test_fischer_cluster_and_named_instances():
    cluster = build_cluster("fischer-30")
    assert cluster.n_nodes == 30 and set(cluster.slots.tolist()) == {1}
    assert cluster.nodes[0].cores == 4 and cluster.nodes[0].ghz == 2.7 and cluster.capacity[0] == 8
    assert build_graph("fischer-payload-10").n_tasks == 80  # spout + 7 bolts, P = 10
    assert build_graph("fischer-bytes-112-10").n_tasks == 40  # depth 3 (V-B1)


def test_run_cell_matches_the_shared_metrics_and_reports_missing_and_infeasible():
    row = run_cell(Cell("t", "even", "linear-12", "homogeneous-10", models=("default", "io-bound")))
    graph, cluster = build_graph("linear-12"), build_cluster("homogeneous-10")
    expected = evaluate(graph, get_scheduler("even").schedule(graph, cluster), cluster)
    assert row["status"] == "ok"
    assert row["inter_node_traffic"] == expected["inter_node_traffic"]
    assert row["nodes_used"] == expected["nodes_used"]
    assert row["throughput_default"] > 0 and row["bottleneck_io-bound"] == "latency"
    assert run_cell(Cell("t", "no-such", "linear-12", "homogeneous-10"))["status"] == "missing"
    # 25 wordcount tasks of load 1 on one low node of capacity 8
    assert run_cell(Cell("t", "even", "wordcount", "high-low-0-1"))["status"] == "infeasible"


def test_acking_doubles_messages_by_hand():
    # fischer-metis-scheduler.txt V-B2: depth-7 chain, per spout tuple 7 data tuples; with acking
    # 7 acks + init + completion: (7 + 9) / 7 = 16 / 7 messages, whatever the placement
    for scheduler in ("even", "metis"):
        if scheduler not in available():
            continue
        row = run_cell(Cell("t", scheduler, "fischer-payload-10", "fischer-10", models=("acking", "default")))
        assert row["messages_per_source_tuple_default"] == pytest.approx(7.0)
        assert row["messages_per_source_tuple_acking"] == pytest.approx(16.0)


def test_local_processes_give_the_same_rows_as_sequential():
    cells = [Cell("t", "even", w, "heterogeneous-10") for w in ("linear-10", "star-12", "diamond-14")]
    assert [stable(r) for r in run_cells(cells, jobs=2)] == [stable(r) for r in run_cells(cells)]


@pytest.mark.spark
def test_spark_engine_gives_the_same_rows(spark):
    from streamsched.pipeline.sweep import map_on_spark

    cells = [Cell("t", "even", w, "homogeneous-10", models=("default", "cpu-bound")) for w in ("linear-10", "star-12")]
    assert [stable(r) for r in map_on_spark(run_cell, cells, spark)] == [stable(r) for r in run_cells(cells)]


def test_thesis_quick_writes_tables_figures_and_names_missing(tmp_path):
    result = reproduce("thesis", tmp_path, schedulers=["even", "top-storm", "not-a-scheduler"], quick=True)
    assert result.missing == ["not-a-scheduler"]
    names = {p.name for p in result.written}
    assert {"results.csv", "results.json", "comparison.csv", "comparison.md"} <= names
    assert any(p.suffix == ".png" for p in result.written)
    md = (tmp_path / "comparison.md").read_text()
    assert "Not registered, so not run: not-a-scheduler." in md
    rows = json.loads((tmp_path / "results.json").read_text())
    by = {(r["workload"], r["label"], r["scheduler"]): r for r in rows if r["status"] == "ok"}
    # Table 4.2 scenario 1: 3 slots per node, 3 required; even takes 3 interleaved slots = 3 nodes
    assert by[("wordcount", "S1", "even")]["workers_used"] == 3
    assert by[("wordcount", "S1", "even")]["nodes_used"] == 3
    # eq. 1.2: throughput per node = throughput / nodes used
    r = by[("exclamation", "S4", "even")]
    assert r["per_node_default"] == pytest.approx(r["throughput_default"] / r["nodes_used"])


@pytest.mark.skipif("optimal" not in available() or "i-scheduler" not in available(),
                    reason="needs the optimal and i-scheduler schedulers")
@pytest.mark.slow
def test_micro_optimum_never_beats_the_optimum(tmp_path):
    result = reproduce("micro-optimum", tmp_path, schedulers=["optimal", "even"], quick=True)
    rows = [r for r in result.rows if r.get("status") not in ("missing",)]
    optimum = {(r["workload"], r["cluster"]): r["inter_node_traffic"] for r in rows if r["scheduler"] == "optimal"}
    assert len(optimum) == 18  # 3 shapes x 3 quick sizes x 2 clusters
    for r in rows:
        if r["scheduler"] == "even":
            assert r["inter_node_traffic"] >= optimum[(r["workload"], r["cluster"])] - 1e-9
    assert (tmp_path / "figures" / "cost-diamond-heterogeneous-10.png").exists()


def test_paper_numbers_are_the_printed_ones():
    # i-scheduler.txt section 5: diamond-30 heterogeneous 148 vs 146; star-30 90 vs 86
    assert paper.MICRO_COST[("diamond", 30, "heterogeneous-10")] == {"optimal": 146, "i-scheduler": 148}
    assert paper.MICRO_COST[("star", 30, "heterogeneous-10")] == {"optimal": 86, "i-scheduler": 90}
    # i-scheduler.txt 6.2: 3700 / 5200 / 6900 on the homogeneous cluster
    assert paper.SECTION6_THROUGHPUT[("smart-home", "high-low-8-0")]["i-scheduler"] == 6900
    assert paper.THESIS_SCENARIOS[4] == (4, 4)


def test_cli_reproduce_rejects_bad_input(tmp_path):
    assert main(["reproduce", "no-such-experiment", "-o", str(tmp_path)]) == 2
    assert main(["reproduce", "thesis", "--quick", "--engine", "mpi", "-o", str(tmp_path)]) == 2
    assert main(["reproduce", "thesis", "--quick", "--jobs", "0", "-o", str(tmp_path)]) == 2
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["reproduce", "thesis", "--quick", "-o", str(blocker)]) == 2


def test_cli_reproduce_fischer_quick(tmp_path):
    assert main(["reproduce", "fischer", "--quick", "--schedulers", "even,metis", "-o", str(tmp_path)]) == 0
    md = (tmp_path / "comparison.md").read_text()
    assert "| payload | 10 | metis |" in md
    assert (tmp_path / "figures" / "tuple-size.png").exists()


TOY = """
from streamsched.evaluation.experiments.cells import Cell, Experiment


def list_cells(schedulers, quick, seed):
    return [Cell("toy", s, "linear-10", "homogeneous-10", seed) for s in schedulers]


EXPERIMENT = Experiment("NAME", "a one-file reproduction", ("even",), list_cells, lambda rows, out: [])
"""


@pytest.fixture
def add_experiment_file(tmp_path, monkeypatch):
    """Adds one module to the experiments package (its path extended by ``tmp_path``) and
    resets the registry; the module is forgotten afterwards."""
    module = "streamsched.evaluation.experiments.toy_reproduction"

    def add(name: str) -> None:
        (tmp_path / "toy_reproduction.py").write_text(TOY.replace("NAME", name))
        monkeypatch.setattr(experiments_package, "__path__", [*experiments_package.__path__, str(tmp_path)])
        monkeypatch.setattr(registry, "_EXPERIMENTS", {})

    yield add
    sys.modules.pop(module, None)


def test_one_file_adds_a_reproduction(tmp_path, add_experiment_file):
    add_experiment_file("toy")
    assert list(registry.experiments()) == ["edge-cloud", "edge-cloud-large", "fischer", "micro-optimum", "section6",
                                            "thesis", "toy"]
    result = reproduce("toy", tmp_path / "out")
    (row,) = result.rows
    # its cells name built-in instances; even places linear-10 like a direct run
    graph, cluster = build_graph("linear-10"), build_cluster("homogeneous-10")
    expected = evaluate(graph, get_scheduler("even").schedule(graph, cluster), cluster)
    assert row["status"] == "ok" and row["nodes"] == 10
    assert row["inter_node_traffic"] == expected["inter_node_traffic"]
    assert {p.name for p in result.written} == {"results.csv", "results.json"}


def test_two_experiments_of_one_name_are_refused(add_experiment_file):
    add_experiment_file("thesis")
    with pytest.raises(ValueError, match="'thesis' defined twice"):
        registry.experiments()
