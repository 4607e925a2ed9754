"""Nimbus' stored topologies pinned by hand on small topologies written here (issue 34 item 4;
the survivors of ``make mutate MODULE=engines/storm/nimbus.py``): a pair joined by both a
global and a shuffle or fields stream, ``topology.acker.executors`` unset with several workers,
Storm's task ids, resources from the component, the conf and the defaults, and priorities.

The files are written with thriftpy2 from the reader's IDL (the bytes themselves are checked
against an independent decoder in test_storm_nimbus.py on Storm's own files)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from streamsched.engines.storm import nimbus
from streamsched.errors import InputError


def grouping(kind: str, fields=("word",)):
    t = nimbus._thrift()
    if kind == "global":
        return t.Grouping(fields=[])
    if kind == "fields":
        return t.Grouping(fields=list(fields))
    return t.Grouping(**{kind: t.NullStruct()})


def write(directory: Path, topology_id: str, conf: dict, spouts: dict, bolts: dict) -> Path:
    """``<id>-stormcode.ser`` and ``-stormconf.ser``: ``spouts``/``bolts`` name -> (hint, json_conf,
    [(source, stream, grouping kind), ...])."""
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.utils import serialize

    t = nimbus._thrift()

    def common(hint, json_conf, inputs):
        return t.ComponentCommon(inputs={t.GlobalStreamId(componentId=s, streamId=st): grouping(g)
                                         for s, st, g in inputs},
                                 streams={}, parallelism_hint=hint,
                                 json_conf=json.dumps(json_conf) if json_conf is not None else None)

    topology = t.StormTopology(spouts={n: t.SpoutSpec(spout_object=t.ComponentObject(serialized_java=b""),
                                                      common=common(*spec)) for n, spec in spouts.items()},
                               bolts={n: t.Bolt(bolt_object=t.ComponentObject(serialized_java=b""),
                                                common=common(*spec)) for n, spec in bolts.items()},
                               state_spouts={})
    code = directory / f"{topology_id}{nimbus.CODE_SUFFIX}"
    code.write_bytes(gzip.compress(serialize(topology, TBinaryProtocolFactory())))
    (directory / f"{topology_id}{nimbus.CONF_SUFFIX}").write_bytes(gzip.compress(json.dumps(conf).encode()))
    return code


def pairs(graph) -> set[tuple[str, str]]:
    """Edges as (operator:index within operator, ...) labels."""
    first = {op: int(np.flatnonzero(graph.task_operator == op)[0]) for op in range(len(graph.operator_names))}
    label = lambda t: f"{graph.operator_names[graph.task_operator[t]]}{t - first[graph.task_operator[t]]}"
    return {(label(s), label(d)) for s, d in zip(graph.src.tolist(), graph.dst.tolist())}


@pytest.mark.parametrize("other", ["shuffle", "fields"])
@pytest.mark.parametrize("streams", [("a", "b"), ("b", "a")])
def test_a_pair_joined_by_a_global_and_a_shuffle_or_fields_stream_connects_every_pair(tmp_path, other, streams):
    """s (2 executors) -> b (3) by a global stream and by a shuffle (or fields) stream, in either
    order of stream ids: the shuffle connects all 6 pairs, which the global one (to b's first
    executor) cannot narrow. A pair joined by the global stream alone: each sender to b0."""
    global_id, other_id = streams
    code = write(tmp_path, "t1", {"topology.name": "t1", "topology.acker.executors": 0},
                 {"s": (2, None, [])}, {"b": (3, None, [("s", global_id, "global"), ("s", other_id, other)]),
                                        "g": (2, None, [("s", global_id, "global")])})
    graph = nimbus.read_topology(code).graph
    every = {(f"s{i}", f"b{j}") for i in range(2) for j in range(3)}
    assert pairs(graph) == every | {("s0", "g0"), ("s1", "g0")}
    assert graph.n_edges == 8 and graph.rate.tolist() == [1.0] * 8


def test_a_self_stream_by_global_grouping_and_by_shuffle(tmp_path):
    """b (3) -> b by a global stream: b1 and b2 to b0 (b0 not to itself); c (2) -> c by shuffle:
    c0 -> c1 and c1 -> c0."""
    code = write(tmp_path, "t2", {"topology.name": "t2", "topology.acker.executors": 0}, {"s": (1, None, [])},
                 {"b": (3, None, [("s", "x", "shuffle"), ("b", "loop", "global")]),
                  "c": (2, None, [("c", "loop", "shuffle")])})
    assert pairs(nimbus.read_topology(code).graph) == {("s0", "b0"), ("s0", "b1"), ("s0", "b2"), ("b1", "b0"),
                                                       ("b2", "b0"), ("c0", "c1"), ("c1", "c0")}


def test_ackers_unset_follow_the_workers(tmp_path):
    """topology.acker.executors unset, topology.workers 3: 3 ackers (StormCommon.addAcker), each
    fed by every spout and bolt executor (fields) and answering the spouts (direct); Storm's
    task ids number the components by name (__acker 1-3, b 4-5, s 6-7). acker CPU and memory
    from topology.acker.*, other components' from the conf or Storm's defaults."""
    conf = {"topology.name": "t3", "topology.workers": 3, "topology.acker.cpu.pcore.percent": 5,
            "topology.acker.resources.onheap.memory.mb": 64, "topology.component.resources.offheap.memory.mb": 32}
    code = write(tmp_path, "t3", conf, {"s": (2, None, [])}, {"b": (2, None, [("s", "default", "shuffle")])})
    topology = nimbus.read_topology(code, ackers=True)
    graph = topology.graph
    assert topology.workers == 3 and topology.acker_executors == 3
    assert list(graph.operator_names) == ["s", "b", "__acker"]
    assert graph.task_ids.tolist() == [6, 7, 4, 5, 1, 2, 3]
    ackers = {f"__acker{k}" for k in range(3)}
    spouts, bolts = {"s0", "s1"}, {"b0", "b1"}
    expected = ({(s, b) for s in spouts for b in bolts} | {(x, a) for x in spouts | bolts for a in ackers}
                | {(a, s) for a in ackers for s in spouts})
    assert pairs(graph) == expected and graph.n_edges == len(expected) == 22
    assert (graph.load * 100).tolist() == [10.0] * 4 + [5.0] * 3
    assert graph.memory_mb.tolist() == [160.0] * 4 + [96.0] * 3 and graph.onheap_mb.tolist() == [128.0] * 4 + [64.0] * 3
    assert topology.executors == 4
    without = nimbus.read_topology(code)
    assert list(without.graph.operator_names) == ["s", "b"] and without.acker_executors == 3 and without.executors == 4
    one = write(tmp_path, "t4", {"topology.name": "t4"}, {"s": (1, None, [])}, {})
    assert nimbus.read_topology(one).acker_executors == 1  # neither set: one worker, one acker


def test_a_components_resources_override_the_conf_and_its_map_overrides_both(tmp_path):
    conf = {"topology.name": "t5", "topology.acker.executors": 0, nimbus.CPU_KEY: 20, nimbus.ONHEAP_KEY: 256,
            "topology.worker.max.heap.size.mb": 1024}
    spec = {nimbus.CPU_KEY: 50, nimbus.RESOURCES_MAP_KEY: {nimbus.ONHEAP_KEY: 300, nimbus.OFFHEAP_KEY: 10}}
    code = write(tmp_path, "t5", conf, {"s": (1, spec, [])}, {"b": (1, None, [("s", "d", "all")])})
    topology = nimbus.read_topology(code)
    assert (topology.graph.load * 100).tolist() == [50.0, 20.0]
    assert topology.graph.memory_mb.tolist() == [310.0, 256.0] and topology.graph.onheap_mb.tolist() == [300.0, 256.0]
    assert topology.worker_heap_mb == 1024.0 and topology.graph.worker_heap_mb == 1024.0
    default = write(tmp_path, "t6", {"topology.name": "t6", "worker.heap.memory.mb": 512}, {"s": (1, None, [])}, {})
    assert nimbus.read_topology(default).worker_heap_mb == 512.0
    bare = write(tmp_path, "t7", {"topology.name": "t7"}, {"s": (1, None, [])}, {})
    assert nimbus.read_topology(bare).worker_heap_mb == nimbus.DEFAULT_WORKER_HEAP_MB == 768.0


def test_topology_tasks_below_the_hint_run_fewer_executors(tmp_path):
    """b: hint 4, topology.tasks 2: Nimbus runs 2 executors (one task each), TestLargeCluster's
    hint count 4; ids by name: b 1-2, s 3."""
    code = write(tmp_path, "t8", {"topology.name": "t8", "topology.acker.executors": 0}, {"s": (1, None, [])},
                 {"b": (4, {"topology.tasks": 2}, [("s", "d", "shuffle")])})
    real, hint = nimbus.read_topology(code), nimbus.read_topology(code, executors="hint")
    assert real.graph.n_tasks == 3 and real.graph.task_ids.tolist() == [3, 1, 2]
    assert hint.graph.n_tasks == 5 and hint.graph.task_ids.tolist() == [0, 1, 2, 3, 4]
    assert real.executors == 3 and hint.executors == 5


def test_priorities_and_read_dir(tmp_path):
    """Priority ascending, then id; two topologies of one name are one line naming both ids."""
    write(tmp_path, "b", {"topology.name": "B", "topology.priority": 1}, {"s": (1, None, [])}, {})
    write(tmp_path, "a", {"topology.name": "A"}, {"s": (1, None, [])}, {})
    write(tmp_path, "c", {"topology.name": "C", "topology.priority": 1}, {"s": (1, None, [])}, {})
    topologies = nimbus.read_dir(tmp_path)
    assert [t.topology_id for t in topologies] == ["a", "b", "c"]
    assert [t.priority for t in topologies] == [29, 1, 1] and nimbus.priority_order(topologies) == [1, 2, 0]
    write(tmp_path, "d", {"topology.name": "A"}, {"s": (1, None, [])}, {})
    with pytest.raises(InputError, match="topology name 'A' in both a and d"):
        nimbus.read_dir(tmp_path)


def test_an_empty_topology_and_bad_values(tmp_path):
    empty = write(tmp_path, "e", {"topology.name": "E"}, {}, {})
    topology = nimbus.read_topology(empty, ackers=True)
    assert topology.empty and topology.graph.n_tasks == 0 and topology.executors == 0
    bad = write(tmp_path, "f", {"topology.name": "F", "topology.workers": -1}, {"s": (1, None, [])}, {})
    with pytest.raises(InputError, match="topology.workers is -1; expected a number >= 0"):
        nimbus.read_topology(bad)
    hint0 = write(tmp_path, "h", {"topology.name": "H"}, {"s": (0, None, [])}, {})
    with pytest.raises(InputError, match="parallelism_hint 0; must be >= 1"):
        nimbus.read_topology(hint0)


def test_read_dir_passes_ackers_and_executors(tmp_path):
    write(tmp_path, "t", {"topology.name": "T", "topology.workers": 2}, {"s": (3, {"topology.tasks": 1}, [])}, {})
    (with_ackers,) = nimbus.read_dir(tmp_path, ackers=True)
    assert list(with_ackers.graph.operator_names) == ["s", "__acker"] and with_ackers.graph.n_tasks == 3
    (hinted,) = nimbus.read_dir(tmp_path, executors="hint")
    assert hinted.graph.n_tasks == 3 and list(hinted.graph.operator_names) == ["s"]


def _bad(tmp_path, name, conf=None, spouts=None, bolts=None, common=None):
    code = write(tmp_path, name, conf or {"topology.name": name}, spouts or {"s": (1, None, [])}, bolts or {})
    if common is not None:  # rewrite with the spout's ComponentCommon changed
        from thriftpy2.protocol import TBinaryProtocolFactory
        from thriftpy2.utils import serialize

        topology = nimbus.decode_topology(code)
        common(topology.spouts["s"])
        code.write_bytes(gzip.compress(serialize(topology, TBinaryProtocolFactory())))
    return code


@pytest.mark.parametrize("case, message", [
    ("nocommon", "component 's': no ComponentCommon"),
    ("notjson", "component 's': json_conf is not JSON"),
    ("notobject", "component 's': json_conf is not a JSON object"),
    ("booltasks", "component 's': topology.tasks is True; expected an integer >= 0"),
    ("negtasks", "component 's': topology.tasks is -1; expected an integer >= 0"),
    ("texttasks", "component 's': topology.tasks is '2'; expected an integer >= 0"),
    ("nogrouping", "component 'b': input s/d has no grouping set"),
    ("boolcpu", "component 's': topology.component.cpu.pcore.percent is True; expected a number >= 0"),
    ("infheap", "component 's': topology.component.resources.onheap.memory.mb is inf; expected a number >= 0"),
    ("textworkers", "topology.workers is '2'; expected a number >= 0"),
])
def test_bad_input_is_one_line_naming_the_file_component_and_field(tmp_path, case, message):
    t = nimbus._thrift()
    spouts, bolts, conf, common = None, None, None, None
    if case == "nocommon":
        common = lambda spec: setattr(spec, "common", None)  # noqa: E731
    elif case == "notjson":
        common = lambda spec: setattr(spec.common, "json_conf", "{not json")  # noqa: E731
    elif case == "notobject":
        common = lambda spec: setattr(spec.common, "json_conf", "[1]")  # noqa: E731
    elif case.endswith("tasks"):
        spouts = {"s": (1, {"topology.tasks": {"booltasks": True, "negtasks": -1, "texttasks": "2"}[case]}, [])}
    elif case == "nogrouping":
        bolts = {"b": (1, None, [("s", "d", "shuffle")])}
        common = None
    elif case == "boolcpu":
        spouts = {"s": (1, {nimbus.CPU_KEY: True}, [])}
    elif case == "infheap":
        spouts = {"s": (1, {nimbus.ONHEAP_KEY: float("inf")}, [])}
    elif case == "textworkers":
        conf = {"topology.name": case, "topology.workers": "2"}
    code = _bad(tmp_path, case, conf, spouts, bolts, common)
    if case == "nogrouping":
        from thriftpy2.protocol import TBinaryProtocolFactory
        from thriftpy2.utils import serialize

        topology = nimbus.decode_topology(code)
        for stream in topology.bolts["b"].common.inputs:
            topology.bolts["b"].common.inputs[stream] = t.Grouping()
        code.write_bytes(gzip.compress(serialize(topology, TBinaryProtocolFactory())))
    with pytest.raises(InputError) as info:
        nimbus.read_topology(code)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert str(code if case != "textworkers" else code.with_name(f"{case}{nimbus.CONF_SUFFIX}")) in text


def test_zero_tasks_are_allowed_and_run_no_executor(tmp_path):
    """topology.tasks 0 (Storm's __system has none): no executor in Nimbus' count."""
    code = write(tmp_path, "z", {"topology.name": "Z", "topology.acker.executors": 0},
                 {"s": (1, None, [])}, {"b": (2, {"topology.tasks": 0}, [("s", "d", "shuffle")])})
    topology = nimbus.read_topology(code)
    assert list(topology.graph.operator_names) == ["s"] and topology.graph.n_edges == 0


def test_read_dir_needs_a_directory_with_stored_topologies(tmp_path):
    with pytest.raises(InputError, match=f"{tmp_path / 'none'}: not a directory"):
        nimbus.read_dir(tmp_path / "none")
    with pytest.raises(InputError, match=f"{tmp_path}: no <id>-stormcode.ser file"):
        nimbus.read_dir(tmp_path)


def test_event_loggers_and_metrics_consumers_take_storm_task_ids(tmp_path):
    """Storm numbers every component's tasks by name, its own included: __acker (1 task: one
    worker) 1, __eventlogger (1) 2, __metricsorg.C (parallelism.hint 2) 3-4, b 5-6, s 7. Without
    them: __acker 1, b 2-3, s 4."""
    conf = {"topology.name": "E", "topology.eventlogger.executors": 1,
            "topology.metrics.consumer.register": [{"class": "org.C", "parallelism.hint": 2}]}
    code = write(tmp_path, "e", conf, {"s": (1, None, [])}, {"b": (2, None, [("s", "d", "shuffle")])})
    topology = nimbus.read_topology(code)
    assert topology.graph.task_ids.tolist() == [7, 5, 6] and topology.graph.name == "E"
    plain = write(tmp_path, "p", {"topology.name": "P"}, {"s": (1, None, [])}, {"b": (2, None, [("s", "d", "shuffle")])})
    assert nimbus.read_topology(plain).graph.task_ids.tolist() == [4, 2, 3]
    one = write(tmp_path, "o", {"topology.name": "O", "topology.metrics.consumer.register": [{"class": "org.C"}]},
                {"s": (1, None, [])}, {})
    assert nimbus.read_topology(one).graph.task_ids.tolist() == [3]  # __acker 1, __metricsorg.C 2 (hint 1), s 3


def test_the_ackers_streams_as_storm_adds_them(tmp_path):
    code = write(tmp_path, "a", {"topology.name": "A"}, {"s": (1, None, [])}, {"b": (1, None, [("s", "d", "shuffle")])})
    components = {c.name: c for c in nimbus.read_topology(code).components}
    acker = components["__acker"]
    assert acker.kind == "system" and acker.executors == acker.tasks == 1
    assert acker.inputs == (("s", "__ack_init", "fields"), ("b", "__ack_ack", "fields"))
    assert components["s"].inputs == (("__acker", "__ack_ack", "direct"),)
    assert components["b"].inputs == (("s", "d", "shuffle"),)
    fields = write(tmp_path, "f", {"topology.name": "F", "topology.acker.executors": 0}, {"s": (1, None, [])},
                   {"b": (1, None, [("s", "d", "fields")])})
    assert {c.name: c for c in nimbus.read_topology(fields).components}["b"].inputs == (("s", "d", "fields"),)


def test_a_conf_given_apart_and_a_system_source(tmp_path):
    """A conf named explicitly is read instead of the one beside the code; a subscription to a
    system stream (__system) is allowed, to an unknown component one line."""
    code = write(tmp_path, "c", {"topology.name": "beside"}, {"s": (1, None, [])},
                 {"b": (1, None, [("s", "d", "shuffle"), ("__system", "__tick", "shuffle")])})
    other = tmp_path / "other.ser"
    other.write_bytes(gzip.compress(json.dumps({"topology.name": "apart"}).encode()))
    assert nimbus.read_topology(code, conf=other).name == "apart" and nimbus.read_topology(code).name == "beside"
    bad = write(tmp_path, "u", {"topology.name": "U"}, {"s": (1, None, [])}, {"b": (1, None, [("x", "d", "shuffle")])})
    with pytest.raises(InputError, match=r"u-stormcode.ser: component 'b' subscribes to x/d, which is no component"):
        nimbus.read_topology(bad)


@pytest.mark.parametrize("key", ["topology.workers", "topology.acker.executors", "topology.worker.max.heap.size.mb",
                                 "worker.heap.memory.mb", "topology.priority", "topology.eventlogger.executors"])
def test_a_bad_conf_number_names_the_conf_and_the_key(tmp_path, key):
    code = write(tmp_path, "k", {"topology.name": "K", key: "many"}, {"s": (1, None, [])}, {})
    with pytest.raises(InputError) as info:
        nimbus.read_topology(code)
    assert str(info.value) == f"{tmp_path / ('k' + nimbus.CONF_SUFFIX)}: {key} is 'many'; expected a number >= 0"


@pytest.mark.parametrize("register, message", [
    ({"class": "C"}, "topology.metrics.consumer.register is not a list of {class, ...} entries"),
    ([{"class": 3}], "topology.metrics.consumer.register is not a list of {class, ...} entries"),
    (["C"], "topology.metrics.consumer.register is not a list of {class, ...} entries"),
    ([{"class": "C", "parallelism.hint": "two"}], "parallelism.hint is 'two'; expected a number >= 0"),
])
def test_a_bad_metrics_consumer_register_is_one_line(tmp_path, register, message):
    code = write(tmp_path, "m", {"topology.name": "M", "topology.metrics.consumer.register": register},
                 {"s": (1, None, [])}, {})
    with pytest.raises(InputError) as info:
        nimbus.read_topology(code)
    assert str(info.value) == f"{tmp_path / ('m' + nimbus.CONF_SUFFIX)}: {message}"


def test_bad_files_are_one_line_naming_the_file(tmp_path):
    code = write(tmp_path, "f", {"topology.name": "F"}, {"s": (1, None, [])}, {})
    conf = tmp_path / f"f{nimbus.CONF_SUFFIX}"
    conf.write_bytes(gzip.compress(b"[1, 2]"))
    with pytest.raises(InputError, match=f"^{conf}: the conf is list, not a JSON object$"):
        nimbus.read_topology(code)
    conf.write_bytes(gzip.compress(b"{oops"))
    with pytest.raises(InputError, match=f"^{conf}: not a gzip of a JSON conf"):
        nimbus.read_topology(code)
    conf.unlink()
    with pytest.raises(InputError, match=f"^{conf}: file not found$"):
        nimbus.read_topology(code)
    with pytest.raises(InputError, match=f"^{tmp_path / 'x.ser'}: not a <id>-stormcode.ser file$"):
        nimbus.read_topology(tmp_path / "x.ser")
    with pytest.raises(InputError, match="^executors: 'all' is not one of nimbus, hint$"):
        nimbus.read_topology(code, executors="all")
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.utils import serialize

    t = nimbus._thrift()
    half = tmp_path / f"h{nimbus.CODE_SUFFIX}"
    half.write_bytes(gzip.compress(serialize(t.StormTopology(spouts={}), TBinaryProtocolFactory())))
    with pytest.raises(InputError, match=f"^{half}: StormTopology without its required 'spouts' and 'bolts' maps"):
        nimbus.decode_topology(half)
    junk = tmp_path / f"j{nimbus.CODE_SUFFIX}"
    junk.write_bytes(gzip.compress(b"\x0b\x00\x01\xff\xff\xff\xff"))  # a string field of length -1
    with pytest.raises(InputError, match=f"^{junk}: not a"):
        nimbus.decode_topology(junk)


def test_an_unset_parallelism_hint_is_one_executor(tmp_path):
    """Thrift.getParallelismHint: unset is 1."""
    code = write(tmp_path, "n", {"topology.name": "N", "topology.acker.executors": 0}, {"s": (None, None, [])}, {})
    topology = nimbus.read_topology(code, executors="hint")
    assert topology.components[0].executors == 1 and topology.graph.n_tasks == 1


def test_loads_are_in_cores_and_a_bad_acker_conf_value_names_the_conf(tmp_path):
    """Storm's CPU is percent of a core: 10 % (the default) is load 0.1 in cores, the unit the
    cluster's capacities are read in. An acker's bad CPU value names the conf file and the key it
    was read from (it named the components' key before)."""
    code = write(tmp_path, "u", {"topology.name": "U"}, {"s": (2, None, [])}, {})
    graph = nimbus.read_topology(code).graph
    assert graph.load_unit == "cores" and graph.load.tolist() == [0.1, 0.1]
    bad = write(tmp_path, "a", {"topology.name": "A", "topology.acker.cpu.pcore.percent": "lots"},
                {"s": (1, None, [])}, {})
    with pytest.raises(InputError) as info:
        nimbus.read_topology(bad, ackers=True)
    assert str(info.value) == (f"{tmp_path / ('a' + nimbus.CONF_SUFFIX)}: topology.acker.cpu.pcore.percent is "
                               "'lots'; expected a number >= 0")


def test_a_file_thrift_cannot_decode_names_thrifts_error(tmp_path):
    """The error names the exception thriftpy2 raises on the same bytes, and its message."""
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.utils import deserialize

    data = b"\x0b\x00\x01\xff\xff\xff\xff"  # a string field of length -1
    junk = tmp_path / f"j{nimbus.CODE_SUFFIX}"
    junk.write_bytes(gzip.compress(data))
    with pytest.raises(Exception) as raised:
        deserialize(nimbus._thrift().StormTopology(), data, TBinaryProtocolFactory())
    with pytest.raises(InputError) as info:
        nimbus.decode_topology(junk)
    assert str(info.value) == (f"{junk}: not a Thrift-binary StormTopology "
                               f"({type(raised.value).__name__}: {raised.value})")
