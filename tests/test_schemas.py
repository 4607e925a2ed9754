"""One schema mechanism for the documents read and written (issue 28, item 6).

Topology, cluster, placement and graph JSON files are checked against the JSON Schemas in
``src/streamsched/model/schemas/`` and the engine plans against those in
``src/streamsched/engines/schemas/``, all with ``jsonschema`` through
:func:`streamsched.model.io.validate`. Every reader's error is one line
``<file>.<field path>: <problem>`` (the messages below are written out by hand); a plan that
would not validate is refused before anything is written.
"""

from __future__ import annotations

import fnmatch
import json
import math
import random
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.engines import exports
from streamsched.errors import InputError, OutputSchemaError
from streamsched.model import Cluster, Placement, Topology
from streamsched.model import cluster as cluster_module
from streamsched.model import topology as topology_module
from streamsched.model.graph_files import read_graph
from streamsched.model.io import _validator_class, schema_validator, validate
from streamsched.model.units import UNITS
from streamsched.schedulers import get_scheduler

REPO = Path(__file__).resolve().parents[1]
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def schema_files() -> list[tuple[str, str]]:
    return sorted((package, entry.name.removesuffix(".schema.json"))
                  for package in ("streamsched.model", "streamsched.engines")
                  for entry in resources.files(package).joinpath("schemas").iterdir()
                  if entry.name.endswith(".schema.json"))


def raw_schema(package: str, name: str) -> dict:
    return json.loads(resources.files(package).joinpath(f"schemas/{name}.schema.json").read_text())


def test_the_expected_schemas_exist():
    assert set(schema_files()) == {
        ("streamsched.model", "topology"), ("streamsched.model", "cluster"), ("streamsched.model", "placement"),
        ("streamsched.model", "graph"), ("streamsched.engines", "storm-plan"),
        ("streamsched.engines", "heron-packing-plan"), ("streamsched.engines", "kubernetes-manifests")}


@pytest.mark.parametrize("package, name", schema_files())
def test_every_schema_is_a_valid_draft_2020_12_schema(package, name):
    schema = raw_schema(package, name)
    assert schema["$schema"] == DRAFT
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema_validator(name, package).schema == schema


def test_the_schemas_ship_as_package_data():
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["streamsched"]
    for package, name in schema_files():
        path = f"{package.split('.')[1]}/schemas/{name}.schema.json"
        assert any(fnmatch.fnmatch(path, glob) for glob in globs), path


def test_jsonschema_is_a_run_time_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("jsonschema") for d in project["dependencies"])
    assert not any(d.startswith("jsonschema") for extra in project["optional-dependencies"].values() for d in extra)


def enum(package: str, name: str, *path: str) -> tuple:
    node = raw_schema(package, name)
    for key in path:
        node = node[key]
    return tuple(v for v in node["enum"] if v is not None)


def test_the_schemas_name_the_same_choices_as_the_model():
    operator = ("properties", "operators", "items", "properties")
    stream = ("properties", "streams", "items", "properties")
    assert enum("streamsched.model", "topology", *operator, "role") == topology_module.ROLES
    assert enum("streamsched.model", "topology", *stream, "grouping") == topology_module.GROUPINGS
    assert enum("streamsched.model", "cluster", "properties", "nodes", "items", "properties", "kind") == cluster_module.KINDS
    assert enum("streamsched.model", "cluster", "properties", "node_types", "items", "properties", "kind") == cluster_module.KINDS
    assert enum("streamsched.model", "cluster", "properties", "capacity_unit") == UNITS
    assert enum("streamsched.model", "graph", "else", "properties", "load_unit") == UNITS


# ------------------------------------------------------------------------------ readers
A = {"name": "a"}


@pytest.mark.parametrize("document, message", [
    ([], "t.yaml: expected a mapping, got list"),
    (None, "t.yaml: expected a mapping, got NoneType"),
    ({"name": "t"}, "t.yaml.operators: missing"),
    ({"operators": [{"parallelism": 2}]}, "t.yaml.operators[0].name: missing"),
    ({"operators": [{"name": None}]}, "t.yaml.operators[0].name: missing"),
    ({"operators": [{"name": ""}]}, "t.yaml.operators[0].name: must not be empty"),
    ({"operators": {"name": "a"}}, "t.yaml.operators: expected a list, got dict"),
    ({"operators": ["a"]}, "t.yaml.operators[0]: expected a mapping, got str"),
    ({"operators": [{"name": "a", "parallelism": "x"}]}, "t.yaml.operators[0].parallelism: expected an integer, got 'x'"),
    ({"operators": [{"name": "a", "parallelism": 2.5}]}, "t.yaml.operators[0].parallelism: expected an integer, got 2.5"),
    ({"operators": [{"name": "a", "memory_mb": "x"}]}, "t.yaml.operators[0].memory_mb: expected a number, got 'x'"),
    ({"operators": [{"name": "a", "selectivity": True}]}, "t.yaml.operators[0].selectivity: expected a number, got True"),
    ({"operators": [{"name": 7}]}, "t.yaml.operators[0].name: expected a string, got 7"),
    ({"operators": [{"name": "a", "parallelism": 0}]}, "t.yaml.operators[0].parallelism: must be >= 1, got 0"),
    ({"operators": [{"name": "a", "task_load": -0.5}]}, "t.yaml.operators[0].task_load: must be >= 0, got -0.5"),
    ({"operators": [{"name": "a", "source_rate": math.inf}]}, "t.yaml.operators[0].source_rate: must be a finite number, got inf"),
    ({"operators": [{"name": "a", "role": "spout"}]}, "t.yaml.operators[0].role: 'spout' is not one of source, operator, sink"),
    ({"operators": [A], "streams": [{"from": "a", "to": "a", "grouping": "random"}]},
     "t.yaml.streams[0].grouping: 'random' is not one of shuffle, fields, global, all, local-or-shuffle, forward"),
    ({"operators": [A], "streams": [{"from": "a"}]}, "t.yaml.streams[0].to: missing"),
    ({"operators": [A], "colour": "red"}, "t.yaml.colour: unknown field"),
    ({"operators": [{"name": "a", "colour": "red"}]}, "t.yaml.operators[0].colour: unknown field"),
    ({"operators": [A], "streams": [{"from": "a", "to": "a", "weight": 1}]}, "t.yaml.streams[0].weight: unknown field"),
])
def test_topology_errors(document, message):
    with pytest.raises(InputError) as info:
        Topology.from_dict(document, where="t.yaml")
    assert str(info.value) == message


def test_topology_rules_beyond_the_schema_stay_in_python():
    with pytest.raises(InputError, match=r"^t.yaml: stream a->b: unknown operator 'b'$"):
        Topology.from_dict({"operators": [A], "streams": [{"from": "a", "to": "b"}]}, where="t.yaml")
    with pytest.raises(InputError, match=r"^t.yaml: topology 't': streams form a cycle through 'a'$"):
        Topology.from_dict({"name": "t", "operators": [A, {"name": "b"}],
                            "streams": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}]}, where="t.yaml")
    with pytest.raises(InputError, match=r"^t.yaml: topology 't': operator 'a' defined twice$"):
        Topology.from_dict({"name": "t", "operators": [A, A]}, where="t.yaml")


def test_topology_null_is_absent_and_whole_numbers_are_integers():
    plain = Topology.from_dict({"operators": [{"name": "a", "parallelism": 3}]})
    nulls = Topology.from_dict({"name": None, "streams": None, "operators": [
        {"name": "a", "parallelism": 3.0, "role": None, "task_load": None, "memory_mb": None}]})
    assert nulls == plain and type(nulls.operators[0].parallelism) is int and nulls.name == "topology"


def test_topology_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("operators:\n  - {name: a, parallelism: many}\n")
    with pytest.raises(InputError) as info:
        Topology.load(path)
    assert str(info.value) == f"{path}.operators[0].parallelism: expected an integer, got 'many'"


NODE = {"name": "a", "capacity": 1}


@pytest.mark.parametrize("document, message", [
    ("nodes", "c.yaml: expected a mapping, got str"),
    ({"nodes": [{"capacity": 1}]}, "c.yaml.nodes[0].name: missing"),
    ({"nodes": [{"name": "a"}]}, "c.yaml.nodes[0].capacity: missing"),
    ({"capacity_unit": "cores", "nodes": [{"name": "a"}]},
     "c.yaml.nodes[0].capacity: missing (a cores cluster takes capacity or cores)"),
    ({"nodes": "a"}, "c.yaml.nodes: expected a list, got str"),
    ({"nodes": [NODE, 3]}, "c.yaml.nodes[1]: expected a mapping, got int"),
    ({"nodes": [{"name": "a", "capacity": "big"}]}, "c.yaml.nodes[0].capacity: expected a number, got 'big'"),
    ({"nodes": [{**NODE, "slots": "4"}]}, "c.yaml.nodes[0].slots: expected an integer, got '4'"),
    ({"node_types": [{"count": 1.5, "capacity": 1}]}, "c.yaml.node_types[0].count: expected an integer, got 1.5"),
    ({"nodes": [{**NODE, "rack": 3}]}, "c.yaml.nodes[0].rack: expected a string, got 3"),
    ({"nodes": [{"name": "a", "capacity": -1}]}, "c.yaml.nodes[0].capacity: must be >= 0, got -1"),
    ({"nodes": [{**NODE, "ram_mb": math.nan}]}, "c.yaml.nodes[0].ram_mb: must be a finite number, got nan"),
    ({"nodes": [{**NODE, "kind": "fog"}]}, "c.yaml.nodes[0].kind: 'fog' is not one of cloud, edge"),
    ({"node_types": [{"count": 2, "capacity": 1, "kind": "fog"}]}, "c.yaml.node_types[0].kind: 'fog' is not one of cloud, edge"),
    ({"capacity_unit": "cpu", "nodes": [NODE]}, "c.yaml.capacity_unit: 'cpu' is not one of tasks, cores"),
    ({"nodes": [NODE], "racks": 2}, "c.yaml.racks: unknown field"),
    ({"nodes": [{**NODE, "gpus": 2}]}, "c.yaml.nodes[0].gpus: unknown field"),
    ({"node_types": [{"count": 2, "capacity": 1, "name": "x"}]}, "c.yaml.node_types[0].name: unknown field"),
    ({"name": "x"}, "c.yaml: no nodes (give 'nodes' or 'node_types')"),
])
def test_cluster_errors(document, message):
    with pytest.raises(InputError) as info:
        Cluster.from_dict(document, where="c.yaml")
    assert str(info.value) == message


def test_cluster_null_is_absent():
    plain = Cluster.from_dict({"nodes": [NODE], "node_types": [{"count": 2, "capacity": 2, "prefix": "w"}]})
    nulls = Cluster.from_dict({"name": None, "capacity_unit": None, "nodes": [{**NODE, "kind": None, "slots": None}],
                               "node_types": [{"count": 2.0, "capacity": 2, "prefix": "w", "rack": None}]})
    assert nulls.to_dict() == plain.to_dict() == {
        "name": "cluster", "capacity_unit": "tasks",
        "nodes": [{"name": "a", "capacity": 1.0}, {"name": "w1", "capacity": 2.0}, {"name": "w2", "capacity": 2.0}]}


@pytest.fixture(scope="module")
def small():
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("homogeneous-10")
    return graph, cluster, get_scheduler("even").schedule(graph, cluster)


def placement_errors() -> list:
    def drop(key):
        return lambda d: d.pop(key)

    def put(key, index, value):
        return lambda d: d[key].__setitem__(index, value)

    return [
        (lambda d: d.clear(), "p.json.format: missing"),
        (drop("tasks"), "p.json.tasks: missing"),
        (put("node", 3, 1.5), "p.json.node[3]: expected an integer, got 1.5"),
        (put("worker", 0, True), "p.json.worker[0]: expected an integer, got True"),
        (put("tasks", -1, "24"), "p.json.tasks[24]: expected an integer, got '24'"),
        (put("operator", 1, 7), "p.json.operator[1]: expected a string, got 7"),
        (lambda d: d.__setitem__("nodes", "n1"), "p.json.nodes: expected a list, got str"),
        (lambda d: d.__setitem__("metadata", [1]), "p.json.metadata: expected a mapping, got list"),
        (lambda d: d.__setitem__("format", "streamsched.placement/2"),
         "p.json.format: expected 'streamsched.placement/1', got 'streamsched.placement/2'"),
        (lambda d: d["worker"].pop(), "p.json: 'tasks', 'node' and 'worker' differ in length"),
    ]


@pytest.mark.parametrize("change, message", placement_errors())
def test_placement_errors(small, change, message):
    graph, cluster, placement = small
    document = placement.to_dict(graph, cluster)
    change(document)
    with pytest.raises(InputError) as info:
        Placement.from_dict(document, graph, cluster, where="p.json")
    assert str(info.value) == message


def test_placement_fields_beyond_the_schema_are_read_as_before(small):
    """Unknown fields are ignored (a running placement adds ``time``), null metadata is none,
    whole floats are integers (JSON Schema's integer)."""
    graph, cluster, placement = small
    document = placement.to_dict(graph, cluster)
    document.update(time=12.5, metadata=None, node=[float(n) for n in document["node"]])
    again = Placement.from_dict(document, graph, cluster, where="p.json")
    assert again.node_of.tolist() == placement.node_of.tolist() and dict(again.metadata) == {}


@pytest.mark.parametrize("document, message", [
    ([], ": expected a mapping, got list"),
    ({"tasks": []}, ".edges: missing"),
    ({"edges": {"src": 1}}, ".edges: expected a list, got dict"),
    ({"edges": [[1, 2, 1.0]]}, ".edges[0]: expected a mapping, got list"),
    ({"edges": [{"src": 1, "dst": 2, "rate": 1}], "load_unit": "watts"}, ".load_unit: 'watts' is not one of tasks, cores"),
    ({"edges": [{"src": 1, "dst": 2, "rate": 1}], "name": 5}, ".name: expected a string, got 5"),
    ({"edges": [{"src": 1, "dst": 2, "rate": 1}], "tasks": [{"id": 1}, 2]}, ".tasks[1]: expected a mapping, got int"),
    ({"links": "x"}, ".links: expected a list, got str"),
    ({"links": [], "nodes": [None]}, ".nodes[0]: expected a mapping, got NoneType"),
])
def test_graph_json_errors(tmp_path, document, message):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError) as info:
        read_graph(path)
    assert str(info.value) == f"{path}{message}"


def test_graph_json_rows_are_checked_as_tables(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"edges": [{"src": 1, "dst": 2, "rate": 1}, {"src": 2, "dst": 3, "rate": -1}],
                                "comment": "ignored, as before"}))
    with pytest.raises(InputError, match=r"g.json: row 1: rate is -1; must be a finite number in \[0, 1e\+15\]$"):
        read_graph(path)


# ------------------------------------------------------------------------------ the validator
QUICK_SAMPLES = [0, 1, -3, 2**70, 2.0, 2.5, True, False, None, "1", "", {}, {"a": 1}, [], [1], math.inf, math.nan]


@pytest.mark.parametrize("kind", ["integer", "number", "string", "object"])
def test_the_quick_item_pass_accepts_exactly_what_draft_2020_12_accepts(kind):
    """Ours = the standard validator on random arrays (a number must also be finite: JSON has no
    infinity); a refused array names the first wrong item as the standard one does."""
    schema = {"type": "array", "items": {"type": kind}}
    standard, quick = jsonschema.Draft202012Validator(schema), _validator_class()(schema)
    rng = random.Random(28)
    for _ in range(400):
        array = [rng.choice(QUICK_SAMPLES) for _ in range(rng.randrange(6))]
        finite = all(not isinstance(v, float) or math.isfinite(v) for v in array)
        expected = standard.is_valid(array) and (finite or kind not in ("number",))
        assert quick.is_valid(array) == expected, array
        errors = [list(e.absolute_path) for e in quick.iter_errors(array)]
        if not expected and finite:
            assert errors[0] == list(next(standard.iter_errors(array)).absolute_path)


def test_a_long_array_names_its_one_wrong_item():
    schema_document = {"format": "streamsched.placement/1", "nodes": ["a"], "tasks": list(range(200_000)),
                       "node": [0] * 200_000, "worker": [0] * 199_999 + [0.5]}
    with pytest.raises(InputError, match=r"^p.json.worker\[199999\]: expected an integer, got 0.5$"):
        validate(schema_document, "placement", "p.json")


# ------------------------------------------------------------------------------ writers
@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_every_export_is_valid_when_written(small, fmt):
    """What ``export`` returns has passed our validator; plain jsonschema agrees."""
    graph, cluster, placement = small
    document = exports.export(fmt, graph, cluster, placement)
    jsonschema.Draft202012Validator(raw_schema("streamsched.engines", exports.SCHEMAS[fmt])).validate(
        json.loads(json.dumps(document)))


@pytest.mark.parametrize("fmt, writer, change, message", [
    ("storm", "storm_plan", lambda d: d.__setitem__("assignments", []),
     "storm plan.assignments: needs at least 1 entries, got 0"),
    ("heron", "heron_packing_plan", lambda d: d["containerPlans"][0].pop("requiredResource"),
     "heron plan.containerPlans[0].requiredResource: missing"),
    ("kubernetes", "kubernetes_manifests", lambda d: d["items"][0]["spec"].__setitem__("replicas", 2),
     "kubernetes plan.items[0].spec.replicas: expected 1, got 2"),
])
def test_an_export_that_would_not_validate_is_a_loud_error_and_nothing_is_written(
        small, tmp_path, monkeypatch, capsys, fmt, writer, change, message):
    graph, cluster, placement = small
    real = getattr(exports, writer)

    def broken(*args, **kwargs):
        document = real(*args, **kwargs)
        change(document)
        return document

    monkeypatch.setattr(exports, writer, broken)
    with pytest.raises(OutputSchemaError) as info:
        exports.export(fmt, graph, cluster, placement)
    assert str(info.value).startswith(message + " (the ") and "a bug in streamsched" in str(info.value)
    placement.write(tmp_path / "p.json", graph, cluster)
    out = tmp_path / "plan.json"
    code = main(["export", str(tmp_path / "p.json"), "-w", "wordcount", "-c", "homogeneous-10", "--format", fmt,
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == OutputSchemaError.exit_code == 70 and err.startswith(f"error: {message} (") and err.count("\n") == 1
    assert not out.exists()


def test_a_placement_that_would_not_validate_is_not_written(small, tmp_path, monkeypatch):
    graph, cluster, placement = small
    real = Placement.to_dict
    monkeypatch.setattr(Placement, "to_dict", lambda self, g, c: {**real(self, g, c), "tasks": None})
    with pytest.raises(OutputSchemaError, match=r"p.json.tasks: missing \(the placement schema refuses"):
        placement.write(tmp_path / "p.json", graph, cluster)
    assert list(tmp_path.iterdir()) == []
