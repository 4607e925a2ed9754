"""Fuzzing every command entry point in-process (issue 16, item 5).

A seeded generator writes malformed and extreme topology, cluster, graph (CSV, JSON, Parquet
edge lists), placement and engine-capture files and runs them through ``streamsched.cli.main``
(schedule, evaluate, compare, gen-metrics, export, replan, predict, reproduce, edge simulate,
list, read-engine --dir; ingest and watch start Spark and are left to their own tests). The
property of every case:

- the exit code is 0, 2 or 3; on 2 or 3 stderr is exactly one line starting ``error:``; on 0
  any JSON output parses (strictly: no ``NaN`` or ``Infinity``);
- nothing escapes ``main`` (an exception is a failure naming the case);
- no file is written outside the case's temporary directory;
- each case finishes within :data:`CASE_SECONDS` (``signal.alarm`` in the main thread).

The issue's named cases come first, as individual tests with their expected exit code and a
piece of the message.
"""

from __future__ import annotations

import json
import os
import random
import signal
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest

from streamsched.cli import main

#: Time bound of one case, seconds.
CASE_SECONDS = 20
#: Generated cases (the seeded fuzz loop); the run time of the whole file stays under a minute.
FUZZ_CASES = 250
SEED = 16

REPO = Path(__file__).resolve().parents[1]


class CaseTimeout(Exception):
    pass


@contextmanager
def time_bound(seconds: int, case: str):
    def expire(signum, frame):
        raise CaseTimeout(f"{case}: still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _listing(directory: Path) -> set[str]:
    try:
        return set(os.listdir(directory))
    except OSError:
        return set()


def run_case(argv: list[str], tmp_path: Path, capsys, monkeypatch, case: str = "") -> tuple[int, str, str]:
    """Run ``main(argv)`` in ``tmp_path`` under the time bound; check the property; return
    (code, stdout, stderr)."""
    case = case or " ".join(map(str, argv))
    monkeypatch.chdir(tmp_path)
    watched = [REPO, tmp_path.parent, Path.home()]
    before = [_listing(d) for d in watched]
    capsys.readouterr()
    try:
        with time_bound(CASE_SECONDS, case), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            code = main([str(a) for a in argv])
    except CaseTimeout as exc:
        pytest.fail(str(exc))
    except BaseException as exc:  # noqa: BLE001 - anything escaping main is the failure
        pytest.fail(f"{case}: {type(exc).__name__} escaped main: {exc}")
    out, err = capsys.readouterr()
    # a warning would print on stderr beside the error line (or on a success) in a real run
    assert not warned, f"{case}: warnings {[str(w.message) for w in warned]}"
    for directory, seen in zip(watched, before):
        new = _listing(directory) - seen
        if directory == tmp_path.parent:
            new = {n for n in new if not n.startswith(tmp_path.name[:-1])}
        assert not new, f"{case}: wrote {sorted(new)} into {directory}"
    assert code in (0, 2, 3), f"{case}: exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    if code:
        assert err.startswith("error: ") and err.count("\n") == 1, f"{case}: exit {code} with stderr {err[-3000:]!r}"
    else:
        _check_json(out, argv, case)
    return code, out, err


def _strict(token: str):
    raise ValueError(f"non-finite number {token} in JSON output")


def _check_json(out: str, argv: list[str], case: str) -> None:
    json_output = "--json" in argv or (argv[0] == "export" and "--yaml" not in argv and "--out" not in argv)
    if not json_output:
        return
    try:
        json.loads(out, parse_constant=_strict)
    except ValueError as exc:
        pytest.fail(f"{case}: stdout is not valid JSON ({exc}): {out[:500]!r}")


# ---------------------------------------------------------------------------------------------
# Files


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


TOPOLOGY = """name: t
operators:
  - {name: src, role: source, parallelism: 2, source_rate: 100}
  - {name: mid, parallelism: 3}
  - {name: out, role: sink, parallelism: 1}
streams:
  - {from: src, to: mid}
  - {from: mid, to: out, grouping: fields}
"""

CLUSTER = """name: c
nodes:
  - {name: a, capacity: 8}
  - {name: b, capacity: 8}
"""


@pytest.fixture
def run(tmp_path, capsys, monkeypatch):
    return lambda argv, case="": run_case(argv, tmp_path, capsys, monkeypatch, case)


def placement_file(tmp_path: Path, run, workload="wordcount", cluster="high-low-1-2") -> Path:
    path = tmp_path / "p.json"
    code, _, _ = run(["schedule", "-w", workload, "-c", cluster, "-s", "even", "--out", path])
    assert code == 0
    return path


# ---------------------------------------------------------------------------------------------
# The named cases


SMALL = ["-w", "wordcount", "-c", "high-low-1-2"]


@pytest.mark.parametrize("argv, code, message", [
    (["schedule", *SMALL, "-s", "i-scheduler", "-p", "theta=nan"], 2, "theta"),
    (["schedule", *SMALL, "-s", "i-scheduler", "-p", "theta=inf"], 2, "theta"),
    (["compare", *SMALL, "--schedulers", ""], 2, "--schedulers"),
    (["compare", *SMALL, "--schedulers", " , "], 2, "--schedulers"),
    (["reproduce", "micro-optimum", "--quick", "--schedulers", "nosuch"], 2, "nosuch"),
    (["schedule", "-w", "wordcount", "-c", "thesis-9-s0", "-s", "even"], 2, "thesis-9-s0"),
    (["schedule", "-w", "random-100000000", "-c", "high-low-1-2", "-s", "even"], 2, "random-100000000"),
    (["schedule", "-w", "wordcount", "-c", "high-low-100000000-1", "-s", "even"], 2, "high-low-100000000-1"),
    (["schedule", *SMALL, "-s", "isolation", "-p", "machines=nosuch=2"], 2, "nosuch"),
    (["gen-metrics", *SMALL, "--out", "m", "--rows", "1000000000000"], 2, "--rows"),
    (["gen-metrics", *SMALL, "--out", "m", "--rate-scale", "inf"], 2, "--rate-scale"),
    (["gen-metrics", *SMALL, "--out", "m", "--rate-scale", "nan"], 2, "--rate-scale"),
    (["edge", "simulate", "--seed", "-1", "--out", "e", "--intervals", "1", "--no-figures"], 2, "--seed"),
    (["list", "nosuch"], 2, "nosuch"),
    (["schedule", *SMALL, "-s", "ga-incremental", "-p", "mutation=nan"], 2, "mutation"),
    (["schedule", *SMALL, "-s", "ga-global", "-p", "mutation=inf"], 2, "mutation"),
])
def test_named_bad_inputs(run, argv, code, message):
    got, _, err = run(argv)
    assert got == code and message in err, err


def test_watch_window_zero_is_refused_before_spark(run, tmp_path, monkeypatch):
    import streamsched.cli.pipeline as pipeline_cli

    def no_spark(master):
        raise AssertionError("Spark was started before --window was checked")

    monkeypatch.setattr(pipeline_cli, "_spark", no_spark)
    (tmp_path / "in").mkdir()
    code, _, err = run(["watch", "in", "--store", "store", "-c", "high-low-1-2", "--window", "0"])
    assert code == 2 and "--window" in err


@pytest.mark.parametrize("field, value", [("source_rate", ".inf"), ("source_rate", ".nan"), ("parallelism", "1000000000"),
                                          ("parallelism", "1e9"), ("cpu_per_tuple", "-.inf")])
def test_topology_extremes_are_bad_input(run, tmp_path, field, value):
    text = TOPOLOGY.replace("{name: src, role: source,", f"{{name: src, role: source, {field}: {value},", 1)
    if field in ("source_rate", "parallelism"):
        text = TOPOLOGY.replace(f"{field}: {'100' if field == 'source_rate' else '2'}", f"{field}: {value}", 1)
    write(tmp_path / "t.yaml", text)
    code, _, err = run(["schedule", "-g", "t.yaml", "-c", "homogeneous-10", "-s", "even"])
    assert code == 2 and "t.yaml" in err and field in err, err


@pytest.mark.parametrize("capacity", [".nan", ".inf", "-1"])
def test_cluster_capacity_not_finite_is_bad_input(run, tmp_path, capacity):
    write(tmp_path / "c.yaml", f"name: c\nnodes:\n  - {{name: a, capacity: {capacity}}}\n")
    code, _, err = run(["schedule", "-w", "wordcount", "-c", "c.yaml", "-s", "even"])
    assert code == 2 and "c.yaml" in err and "capacity" in err, err


def test_cluster_count_huge_is_bad_input(run, tmp_path):
    write(tmp_path / "c.yaml", "name: c\nnode_types:\n  - {count: 100000000, capacity: 4}\n")
    code, _, err = run(["schedule", "-w", "wordcount", "-c", "c.yaml", "-s", "even"])
    assert code == 2 and "count" in err, err


def test_several_graphs_with_a_slash_in_a_name(run, tmp_path):
    write(tmp_path / "a.yaml", TOPOLOGY.replace("name: t", "name: ../../escaped_topo", 1))
    write(tmp_path / "b.yaml", TOPOLOGY.replace("name: t", "name: b", 1))
    (tmp_path / "out").mkdir()
    code, _, err = run(["schedule", "-g", "a.yaml", "-g", "b.yaml", "-c", "homogeneous-10", "-s", "even",
                        "--out", "out/p.json"])
    assert code == 0, err
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(written) == 2 and all("/" not in n and n.startswith("p-") for n in written), written
    assert not (tmp_path.parent / "escaped_topo.json").exists()


@pytest.mark.parametrize("command", ["schedule", "export", "gen-metrics", "edge"])
@pytest.mark.parametrize("where", ["missing", "directory", "file"])
def test_out_paths(run, tmp_path, command, where):
    placement = placement_file(tmp_path, run)
    (tmp_path / "dir").mkdir()
    write(tmp_path / "file", "x")
    out = {"missing": "no/such/x", "directory": "dir", "file": "file"}[where]
    argv = {"schedule": ["schedule", *SMALL, "-s", "even", "--out", out],
            "export": ["export", placement, *SMALL, "--format", "storm", "--out", out],
            "gen-metrics": ["gen-metrics", *SMALL, "--rows", "100", "--out", out],
            "edge": ["edge", "simulate", "--intervals", "1", "--no-figures", "--out", out]}[command]
    code, _, err = run(argv)
    writes_a_directory = command in ("gen-metrics", "edge")
    if writes_a_directory and where == "directory" or where == "missing":
        assert code == 0, err  # an existing output directory is reused, a missing one made (issue 24)
        assert (tmp_path / out).exists()
    elif where == "file" and not writes_a_directory:
        assert code == 0, err  # a file output replaces the file
    else:
        assert code == 2 and out.split("/")[0] in err, err


def test_compare_exits_3_when_every_scheduler_finds_the_graph_infeasible(run, tmp_path):
    # issue 16: "compare exits 0 when every scheduler is infeasible"; wordcount needs load 25
    write(tmp_path / "tiny.yaml", "name: tiny\nnodes:\n  - {name: a, capacity: 1}\n")
    code, out, err = run(["compare", "-w", "wordcount", "-c", "tiny.yaml", "--schedulers", "even,ols", "--json"])
    assert code == 3 and "every one found it infeasible (first reason: graph 'wordcount' needs load 25" in err, err
    assert [row["status"] for row in json.loads(out)["results"]] == ["infeasible", "infeasible"]
    write(tmp_path / "roomy.yaml", "name: roomy\nnodes:\n  - {name: a, capacity: 13}\n  - {name: b, capacity: 13}\n")
    assert run(["compare", "-w", "wordcount", "-c", "roomy.yaml", "--schedulers", "even,ols", "--json"])[0] == 0


def test_rates_of_1e308_give_valid_json(run, tmp_path):
    write(tmp_path / "g.csv", "src,dst,rate\n0,1,1e308\n1,2,1e308\n0,2,1e308\n")
    for argv in (["schedule", "-g", "g.csv", "-c", "homogeneous-10", "-s", "even"],
                 ["compare", "-g", "g.csv", "-c", "homogeneous-10", "--schedulers", "even,ols", "--json"]):
        code, out, err = run(argv)
        assert code in (0, 2), err


def test_a_topology_of_200000_operators_is_refused_at_once(run, tmp_path):
    # JSON: the same reader and bound; PyYAML alone takes some 20 s to parse 200,000 YAML lines
    document = {"name": "big", "operators": [{"name": f"o{k}"} for k in range(200_000)]}
    write(tmp_path / "big.json", json.dumps(document))
    code, _, err = run(["schedule", "-g", "big.json", "-c", "homogeneous-10", "-s", "even"])
    assert code == 2 and "big.json.operators: 200,000 operators exceed" in err and "STREAMSCHED_MAX_OPERATORS" in err, err


def test_the_bounds_can_be_overridden(run, tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMSCHED_MAX_TASKS", "10")
    code, _, err = run(["schedule", "-w", "wordcount", "-c", "high-low-1-2", "-s", "even"])
    assert code == 2 and "25 tasks exceed the limit of 10" in err and "STREAMSCHED_MAX_TASKS" in err, err
    monkeypatch.setenv("STREAMSCHED_MAX_TASKS", "100")
    monkeypatch.setenv("STREAMSCHED_MAX_NODES", "2")
    code, _, err = run(["schedule", "-w", "wordcount", "-c", "high-low-1-2", "-s", "even"])
    assert code == 2 and "3 nodes exceed the limit of 2" in err, err
    monkeypatch.setenv("STREAMSCHED_MAX_NODES", "3")
    assert run(["schedule", "-w", "wordcount", "-c", "high-low-1-2", "-s", "even"])[0] == 0


def test_the_default_bounds_keep_a_million_tasks():
    from streamsched.model import limits

    assert limits.max_tasks() >= 1_000_000 and limits.max_nodes() >= 100_000


def test_a_placement_with_non_integers_is_refused(run, tmp_path):
    document = placement_file_document()
    document["node"][0] = 1.5
    write(tmp_path / "p.json", json.dumps(document))
    code, _, err = run(["evaluate", "p.json", *SMALL, "--json"])
    assert code == 2 and "p.json.node[0]: expected an integer, got 1.5" in err, err
    document["node"][0] = 2 ** 70
    write(tmp_path / "p.json", json.dumps(document))
    assert run(["evaluate", "p.json", *SMALL, "--json"])[0] == 2


def test_predict_refuses_an_overloaded_placement_as_export_does(run, tmp_path):
    document = placement_file_document()
    document["node"] = [0] * len(document["node"])
    document["worker"] = [0] * len(document["worker"])
    write(tmp_path / "p.json", json.dumps(document))
    evaluated = json.loads(run(["evaluate", "p.json", *SMALL, "--json"])[1])
    assert evaluated["valid"] is False
    code, _, err = run(["predict", "p.json", *SMALL])
    assert code == 2 and "p.json: invalid placement, not predicted" in err, err
    assert run(["export", "p.json", *SMALL, "--format", "storm"])[0] == 2


def test_a_placement_for_another_cluster_is_refused(run, tmp_path):
    placement = placement_file(tmp_path, run)  # wordcount on high-low-1-2
    write(tmp_path / "same-names.yaml", "name: high-low-1-2\nnodes:\n  - {name: n1, capacity: 100}\n"
                                        "  - {name: n2, capacity: 100}\n  - {name: n3, capacity: 100}\n")
    for argv in (["evaluate", placement, "-w", "wordcount", "-c", "high-low-2-1", "--json"],
                 ["evaluate", placement, "-w", "wordcount", "-c", "same-names.yaml", "--json"],
                 ["predict", placement, "-w", "wordcount", "-c", "same-names.yaml"],
                 ["export", placement, "-w", "wordcount", "-c", "same-names.yaml", "--format", "heron"],
                 ["replan", placement, "-w", "wordcount", "-c", "same-names.yaml"]):
        code, _, err = run(argv)
        assert code == 2 and "made for cluster 'high-low-1-2'" in err, (argv, err)


def test_an_engine_reading_round_trips_through_its_cluster_file(run, tmp_path):
    fixture = REPO / "tests" / "fixtures" / "storm_ui" / "wordcount"
    assert run(["read-engine", "storm-ui", "--dir", fixture, "--out", "now", "--json"])[0] == 0
    code, out, err = run(["evaluate", "now/placement.json", "-g", "now/graph.json", "-c", "now/cluster.yaml", "--json"])
    assert code == 0 and json.loads(out)["valid"], err


# ---------------------------------------------------------------------------------------------
# The seeded fuzz loop

NUMBERS = ["0", "-1", "1", "2.5", "1e9", "1e308", "-1e308", ".inf", "-.inf", ".nan", "'x'", "null", "[]", "{}",
           "100000000", "3", "true"]
NUMERIC_CSV = ["0", "-1", "1", "2.5", "1e308", "inf", "nan", "-inf", "x", "", "1e400", "99999999999", "3"]


def _topology(rng: random.Random) -> str:
    lines = TOPOLOGY.splitlines()
    choice = rng.randrange(9)
    if choice == 0:
        return rng.choice(["", "[]", "name: t\n", "{{{", "name: t\noperators: 5\n", "\x00\x01\x02", "- a\n- b\n",
                           "name: t\noperators:\n  - {name: a}\nstreams:\n  - {from: a, to: a}\n"])
    if choice == 1:  # a random field of the first operator
        field = rng.choice(["parallelism", "source_rate", "cpu_per_tuple", "memory_mb", "selectivity",
                            "tuple_bytes", "task_load", "role", "name"])
        lines[2] = f"  - {{name: src, role: source, {field}: {rng.choice(NUMBERS)}}}"
        return "\n".join(lines) + "\n"
    if choice == 2:  # a random stream field
        field = rng.choice(["grouping", "key_skew", "pair_rate", "from", "to"])
        lines[6] = f"  - {{from: src, to: mid, {field}: {rng.choice(NUMBERS + ['nosuch', 'mid'])}}}"
        return "\n".join(lines) + "\n"
    if choice == 3:  # a cycle or a dangling stream
        return TOPOLOGY + rng.choice(["  - {from: out, to: src}\n", "  - {from: nosuch, to: out}\n",
                                      "  - {from: src, to: mid}\n"])
    if choice == 4:  # a duplicated operator or a long name
        name = rng.choice(["mid", "a/b", "../x", "é" * 300, "", " "])
        return TOPOLOGY.replace("operators:\n", f"operators:\n  - {{name: '{name}'}}\n", 1)
    if choice == 5:  # aliases and nesting
        return rng.choice(["a: &a [1, 2]\nb: *a\n", "[" * 3000 + "]" * 3000, "name: t\noperators: &o []\n"])
    if choice == 6:
        return TOPOLOGY.replace("name: t", f"name: {rng.choice(['a/b', '../../e', 'x' * 500, '1', 'null'])}", 1)
    return TOPOLOGY


def _cluster(rng: random.Random) -> str:
    choice = rng.randrange(7)
    if choice == 0:
        return rng.choice(["", "[]", "name: c\n", "name: c\nnodes: []\n", "nodes: 5\n", "\xff\xfe", "name: c\nnodes:\n  - 3\n"])
    if choice == 1:
        field = rng.choice(["capacity", "slots", "speed", "memory_mb", "kind", "name", "rack", "bandwidth"])
        return f"name: c\nnodes:\n  - {{name: a, capacity: 4, {field}: {rng.choice(NUMBERS + ['edge', 'cloud', 'x'])}}}\n"
    if choice == 5:  # edge and cloud nodes
        return (f"name: c\nnodes:\n  - {{name: e, capacity: {rng.choice(['1', '0.5', '.nan', '0'])}, kind: edge}}\n"
                f"  - {{name: v, capacity: 8, kind: {rng.choice(['cloud', 'edge', 'x'])}}}\n")
    if choice == 2:
        return f"name: c\nnode_types:\n  - {{count: {rng.choice(NUMBERS)}, capacity: {rng.choice(NUMBERS)}}}\n"
    if choice == 3:
        return "name: c\nnodes:\n  - {name: a, capacity: 1}\n  - {name: a, capacity: 1}\n"
    if choice == 4:
        return f"name: c\ncapacity_unit: {rng.choice(['cores', 'tasks', 'x', '1'])}\nnodes:\n  - {{name: a, capacity: 0.001}}\n"
    return CLUSTER


def _edges(rng: random.Random, directory: Path) -> Path:
    rows = rng.choice([0, 1, 3, 20])
    value = lambda: rng.choice(NUMERIC_CSV)  # noqa: E731
    header = rng.choice(["src,dst,rate", "source,target,value", "src,dst", "a,b,c", "src,dst,rate,bytes", ""])
    body = [",".join([str(rng.randrange(5)) if rng.random() < 0.8 else value(),
                      str(rng.randrange(5)) if rng.random() < 0.8 else value(), value(), value()][:max(1, header.count(",") + 1)])
            for _ in range(rows)]
    kind = rng.choice(["csv", "csv", "json", "parquet", "sendgraph"])
    name = rng.choice(["g", "g.x", "a b"])
    if kind == "csv":
        path = write(directory / f"{name}.csv", "\n".join([header] + body) + "\n")
        if rng.random() < 0.3:
            write(directory / f"{name.split('.')[0]}.tasks.csv",
                  rng.choice(["id,operator,load\n0,a,1\n1,a,nan\n", "id,load\n0,-1\n", "id,operator,load,load_unit\n0,a,1,x\n",
                              "x\n", "id,operator,load\n0,a,1e308\n"]))
        return path
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = {"src": [rng.randrange(5) for _ in range(rows)], "dst": [rng.randrange(5) for _ in range(rows)],
                   "rate": [rng.choice([1.0, float("nan"), float("inf"), -1.0, 1e308]) for _ in range(rows)]}
        if rng.random() < 0.3:
            columns["rate"] = [rng.choice(["x", "1"]) for _ in range(rows)]
        path = directory / f"{name}.parquet"
        pq.write_table(pa.table(columns), path)
        if rng.random() < 0.2:
            path.write_bytes(path.read_bytes()[: rng.randrange(1, 40)])
        return path
    if kind == "sendgraph":
        links = [{"source": rng.choice([1, 2, "x", None, 1e308]), "target": rng.choice([2, 3, -1]),
                  "value": rng.choice([1, -1, 1e308, "x", None])} for _ in range(rows)]
        return write(directory / f"{name}.json", json.dumps({"nodes": [{"name": "1"}], "links": links}))
    edges = [{"src": rng.choice([0, 1, 2, "x", None, -1, 2**40]), "dst": rng.choice([1, 2, 3]),
              "rate": rng.choice([1, 2.5, -1, "x", None, 1e308, [1]])} for _ in range(rows)]
    document = rng.choice([{"edges": edges}, {"edges": edges, "load_unit": rng.choice(["cores", "x", 1])},
                           {"edges": edges, "tasks": [{"id": 0, "load": rng.choice([1, -1, "x", None])}]},
                           edges, {"edges": "x"}, {}])
    return write(directory / f"{name}.json", json.dumps(document))


def _placement(rng: random.Random, path: Path, good: dict) -> Path:
    document = json.loads(json.dumps(good))
    choice = rng.randrange(8)
    if choice == 0:
        return write(path, rng.choice(["", "{", "[]", "null", "\x00", "{\"format\": 1}"]))
    if choice == 1:
        document["node"] = [rng.choice([0, 1, -1, 99, "x", None, 2.5, 2**70]) for _ in document["node"]]
    elif choice == 2:
        document["tasks"] = document["tasks"][: rng.randrange(len(document["tasks"]))]
    elif choice == 3:
        document["nodes"] = rng.choice([[], ["nosuch"], document["nodes"] * 2, "x"])
    elif choice == 4:
        document[rng.choice(list(document))] = rng.choice([None, 1, "x", [], {}])
    elif choice == 5:
        document["cluster"] = rng.choice(["other", None, 5])
    elif choice == 6:
        document.pop(rng.choice(list(document)))
    return write(path, json.dumps(document))


def _engine_dir(rng: random.Random, directory: Path, kind: str) -> Path:
    import shutil

    source = REPO / "tests" / "fixtures" / ("storm_ui/wordcount" if kind == "storm-ui" else "flink/live-job")
    target = directory / "capture"
    shutil.copytree(source, target)
    files = sorted(p for p in target.rglob("*.json"))
    victim = rng.choice(files)
    text = victim.read_text()
    mutation = rng.randrange(5)
    if mutation == 0:
        victim.write_text(text[: rng.randrange(max(1, len(text)))])
    elif mutation == 1:
        victim.write_text(rng.choice(["null", "[]", "{}", "1e400", "\"x\""]))
    elif mutation == 2:
        victim.write_text(text.replace("1", rng.choice(["-1", "1e308", "\"x\"", "null", "NaN"]), 3))
    elif mutation == 3:
        victim.unlink()
    return target


def _case(rng: random.Random, tmp_path: Path, good_placement: dict) -> list:
    command = rng.choice(["schedule", "schedule", "evaluate", "compare", "gen-metrics", "export", "replan", "predict",
                          "reproduce", "edge", "list", "read-engine", "schedule-files"])
    small_graph = ["-w", rng.choice(["wordcount", "linear-10", "diamond-30"])]
    graph = small_graph
    cluster = rng.choice(["high-low-1-2", "homogeneous-10", "thesis-9-s3"])
    kind = rng.random()
    if kind < 0.35:
        graph = ["-g", write(tmp_path / rng.choice(["t.yaml", "t.json"]), _topology(rng))]
        if str(graph[1]).endswith(".json"):
            graph[1].write_text(json.dumps(_yaml(graph[1].read_text())))
    elif kind < 0.7:
        graph = ["-g", _edges(rng, tmp_path)]
    if rng.random() < 0.4:
        cluster = write(tmp_path / "c.yaml", _cluster(rng))
    if rng.random() < 0.1:
        cluster = rng.choice(["thesis-9-s0", "high-low-0-0", "high-low-x", "nosuch", "c.yml", "thesis-9-s-1"])
    scheduler = rng.choice(["even", "ols", "i-scheduler", "r-storm", "isolation", "nosuch", "t3", "metis", "gr-storm",
                            "top-storm", "a3-storm", "ban-storm", "topset", "cloud-only"])
    params = []
    if rng.random() < 0.3:
        params = ["-p", rng.choice(["theta=nan", "theta=-1", "theta=1e308", "workers=-1", "workers=1e9", "x",
                                    "workers=3", "strict=maybe", "=1", "machines=nosuch=2", "theta="])]
    placement = _placement(rng, tmp_path / "placement.json", good_placement)
    if command == "schedule":
        return ["schedule", *graph, "-c", cluster, "-s", scheduler, *params, "--seed", rng.choice(["0", "-1", "7"]),
                "--out", "out.json"]
    if command == "schedule-files":
        return ["schedule", *graph, *small_graph, "-c", cluster, "-s", rng.choice(["even", "isolation"]), *params,
                "--out", rng.choice(["p.json", "no/p.json", ".", "sub/../p"])]
    if command == "evaluate":
        return ["evaluate", placement, *small_graph, "-c", "high-low-1-2", "--json"]
    if command == "compare":
        schedulers = rng.choice(["even,ols", "all", "", "nosuch", "even,even", "edge", "cluster", ","])
        if schedulers == "all":
            schedulers = "cluster" if "-w" not in graph else "even,ols,i-scheduler"
        if schedulers == "cluster" and not params:
            params = ["-p", "time_limit=1"]  # optimal's: the fuzz loop stays fast
        report = ["--report", rng.choice(["r/report.html", "no/such/r.html", "r.txt", "."])] if rng.random() < 0.15 else []
        return ["compare", *graph, "-c", cluster, "--schedulers", schedulers, *params, *report, "--json"]
    if command == "gen-metrics" and rng.random() < 0.3:
        return ["gen-metrics", "-w", "wordcount", "-c", "high-low-1-2", "--placement", placement, "--format", "storm-log",
                "--rows", "200", "--out", rng.choice(["m", "placement.json"])]
    if command == "gen-metrics":
        return ["gen-metrics", *graph, "-c", cluster, "--out", "m", "--rows", rng.choice(["0", "-5", "10", "500", "10000000000000"]),
                "--format", rng.choice(["csv", "jsonl", "parquet", "storm-log", "x"]),
                "--dirty", rng.choice(["0", "0.5", "1", "-1", "nan"]), "--noise", rng.choice(["0.1", "-1", "inf", "nan"]),
                "--rate-scale", rng.choice(["1", "0", "-1", "inf", "1e308"]), "--rows-per-file", rng.choice(["0", "10", "-1"])]
    if command == "export":
        return ["export", placement, "-w", "wordcount", "-c", "high-low-1-2",
                "--format", rng.choice(["storm", "heron", "kubernetes", "x"]),
                *rng.choice([[], ["--cpu-per-load", rng.choice(["nan", "-1", "inf", "1"])], ["--ackers", "-1"],
                             ["--executors", rng.choice(["split=0", "x=1", "split", "split=nan"])]])]
    if command == "replan":
        return ["replan", placement, "-w", "wordcount", "-c", "high-low-1-2", "--migration-cost",
                rng.choice(["1", "-1", "nan", "inf", "1e308"]), "-p", "time_limit=1"]
    if command == "predict":
        return ["predict", placement, "-w", "wordcount", "-c", "high-low-1-2", "--model", rng.choice(["default", "x"])]
    if command == "reproduce":
        return ["reproduce", rng.choice(["nosuch", "list", "micro-optimum"]), "--quick", "--out", "r",
                "--schedulers", rng.choice(["nosuch", ",", "even,nosuch", ""]), "--jobs", rng.choice(["1", "0", "-1"])]
    if command == "edge":
        return ["edge", "simulate", "--setup", rng.choice(["small", "x"]), "--workload", rng.choice(["rw-0", "x", "poisson"]),
                "--strategy", rng.choice(["topset", "x", "", "all"]), "--rebalance", rng.choice(["none", "x", ","]),
                "--intervals", rng.choice(["1", "0", "2"]), "--seed", rng.choice(["0", "-1", "5"]), "--generations", "2",
                "--population", "4", "--no-figures", "--out", "e"]
    if command == "list":
        return ["list", rng.choice(["all", "schedulers", "x", ""])]
    engine = rng.choice(["storm-ui", "flink"])
    capture = _engine_dir(rng, tmp_path, engine)
    extra = ["--topology-id", "x"] if engine == "storm-ui" and rng.random() < 0.3 else []
    return ["read-engine", engine, "--dir", capture, *extra, "--out", "now", "--json"]


def _yaml(text: str):
    import yaml

    try:
        return yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - a broken document stays a string
        return text
    except RecursionError:
        return text


@pytest.mark.slow
def test_fuzz_every_command(tmp_path_factory, capsys, monkeypatch):
    rng = random.Random(SEED)
    base = tmp_path_factory.mktemp("fuzz")
    good = placement_file_document()
    for k in range(FUZZ_CASES):
        case_dir = base / f"case{k}"
        case_dir.mkdir()
        argv = _case(rng, case_dir, good)
        run_case(argv, case_dir, capsys, monkeypatch, case=f"fuzz case {k}: {' '.join(map(str, argv))}")


def placement_file_document() -> dict:
    from streamsched import workloads
    from streamsched.schedulers import get_scheduler

    graph, cluster = workloads.workload("wordcount"), workloads.cluster("high-low-1-2")
    placement = get_scheduler("even").schedule(graph, cluster, seed=0)
    return _written(placement, graph, cluster)


def _written(placement, graph, cluster) -> dict:
    """The placement file ``schedule --out`` writes (Placement.write), as a document."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "p.json"
        placement.write(path, graph, cluster)
        return json.loads(path.read_text())
