"""Task graphs read from and written to edge lists (CSV, JSON, Parquet) and sendgraph JSON."""

import json

import numpy as np
import pytest

from streamsched import workloads
from streamsched.errors import InputError
from streamsched.model import TaskGraph
from streamsched.model.graph_files import read_graph, write_graph


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_round_trip_keeps_everything(tmp_path, suffix):
    graph = workloads.workload("wordcount")
    path = tmp_path / f"g{suffix}"
    write_graph(graph, path)
    again = read_graph(path)
    assert again.n_tasks == graph.n_tasks and again.n_edges == graph.n_edges
    np.testing.assert_array_equal(again.task_ids, graph.task_ids)
    np.testing.assert_allclose(again.load, graph.load)
    assert again.operator_names == ("count", "split", "spout")  # sorted from the tasks table
    got = {(int(a), int(b)): r for a, b, r in zip(again.task_ids[again.src], again.task_ids[again.dst], again.rate)}
    want = {(int(a), int(b)): r for a, b, r in zip(graph.task_ids[graph.src], graph.task_ids[graph.dst], graph.rate)}
    assert got == pytest.approx(want)


def test_csv_without_tasks_file_infers_tasks(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("source,target,value\n10,20,5\n20,30,2.5\n10,20,1\n")
    g = read_graph(path)
    assert g.task_ids.tolist() == [10, 20, 30]
    assert g.n_edges == 2 and sorted(g.rate.tolist()) == [2.5, 6.0]  # duplicate pair summed
    assert g.load.tolist() == [1.0, 1.0, 1.0]


def test_edge_naming_unknown_task_is_an_error_with_line(tmp_path):
    (tmp_path / "e.tasks.csv").write_text("id,operator,load\n1,a,1\n2,b,1\n")
    path = tmp_path / "e.csv"
    path.write_text("src,dst,rate\n1,2,1\n2,9,1\n")
    with pytest.raises(InputError, match=r"e\.csv: line 3: dst 9 is not a known task"):
        read_graph(path)


def test_negative_rate_names_the_line(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("src,dst,rate\n1,2,1\n2,3,-4\n")
    with pytest.raises(InputError, match=r"line 3: rate is -4"):
        read_graph(path)


def test_missing_column(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="missing column 'src'"):
        read_graph(path)


def test_sendgraph_counts_become_rates(tmp_path):
    path = tmp_path / "sendgraph.json"
    path.write_text(json.dumps({"nodes": [{"name": "12"}, {"name": "30"}, {"name": "7"}],
                                "links": [{"source": 12, "target": 30, "value": 8812}]}))
    g = read_graph(path)
    assert g.task_ids.tolist() == [7, 12, 30]
    assert g.n_edges == 1 and g.rate[0] == 8812.0
    assert read_graph(path, window_s=10).rate[0] == pytest.approx(881.2)


def test_undirected_adjacency_sums_both_directions():
    g = TaskGraph.build("x", ("a",), [0, 0, 0], [1, 1, 1], src=[0, 1, 2], dst=[1, 0, 2], rate=[2.0, 3.0, 9.0])
    a = g.undirected.toarray()
    assert a[0, 1] == a[1, 0] == 5.0 and a[2, 2] == 0.0


def test_arrays_are_read_only():
    g = workloads.workload("linear-10")
    with pytest.raises(ValueError):
        g.rate[0] = 5.0
