"""The Arrow half of ingest (no Spark): row checks, packing into blocks, merging blocks.

Expected values are computed by hand, or by a plain-Python brute force on small random groups.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamsched.errors import InputError
from streamsched.pipeline import native_reader, row_checks
from streamsched.pipeline.blocks import BLOCK, blobs, floats, pack, read_blocks
from streamsched.pipeline.merge import MergeWindow, merge_group

T0 = 1_700_000_000
RANGE = (946684800.0, 4102444800.0)


def _text(**columns: list) -> dict[str, pa.Array]:
    return {k: pa.array(v, pa.string()) for k, v in columns.items()}


def _reasons(checked: row_checks.Validated) -> list[str | None]:
    return [row_checks.ROW_REASONS[c] for c in checked.reason]


def test_row_checks_first_failing_reason_wins():
    rows = [  # timestamp, topology, src, dst, tuples, bytes -> reason
        (f"{T0}", "t", "1", "2", "5", "50", None),
        (f" {T0} ", " t ", " 3 ", "2", "5.5", "", None),          # trimmed; missing bytes = 0
        (f"{T0}", "t", "1", "2", "1e3", "+7", None),
        (f"{T0}", "", "1", "2", "5", "1", row_checks.MISSING),
        (f"{T0}", "t", "1", "2", "abc", "1", row_checks.WRONG_TYPE),
        (f"{T0}", "t", "1.0", "2", "5", "1", row_checks.WRONG_TYPE),   # task ids are integers
        (f"{T0}", "t", "1", "2", "5", "x", row_checks.WRONG_TYPE),     # an optional field must still parse
        (f"{T0}", "t", "1", "2", "-1", "1", row_checks.NEGATIVE),
        (f"{T0}", "t", "1", "2", "NaN", "1", row_checks.NEGATIVE),
        (f"{T0}", "t", "1", "2", "5", "inf", row_checks.NEGATIVE),
        ("5", "t", "1", "2", "5", "1", row_checks.OUT_OF_RANGE),
        ("", "t", "1", "2", "abc", "-1", row_checks.MISSING),          # missing before wrong type
        ("5", "t", "1", "2", "-1", "1", row_checks.NEGATIVE),          # negative before out of range
    ]
    columns = _text(**{f: [r[k] for r in rows] for k, f in enumerate(native_reader.TRAFFIC_FIELDS)})
    checked = row_checks.validate(columns, "traffic", RANGE)
    assert _reasons(checked) == [r[-1] for r in rows]
    assert checked.values["src_task"][1] == 3 and checked.values["bytes"][1] == 0.0
    assert checked.values["tuples"][2] == 1000.0 and checked.values["bytes"][2] == 7.0
    assert checked.values["topology"][1].as_py() == "t"



def test_null_fields_are_missing_not_a_crash():
    """Spark's CSV reader gives an empty field as null, where Arrow's gives "": the row of issue
    15 (``1700000010,wordcount,0,,5,100``) killed ``watch`` with an IndexError."""
    columns = {f: pa.array(v, pa.string()) for f, v in zip(native_reader.TRAFFIC_FIELDS, (
        [f"{T0}", f"{T0}", None], ["t", "t", "t"], ["0", "0", "1"], [None, "5", "2"], ["5", "5", None],
        ["100", None, "1"]))}
    checked = row_checks.validate(columns, "traffic", RANGE)
    assert _reasons(checked) == [row_checks.MISSING, None, row_checks.MISSING]
    assert checked.values["dst_task"][1] == 5 and checked.values["bytes"][1] == 0.0

def test_typed_parquet_columns_are_checked_as_numbers(tmp_path):
    path = tmp_path / "load-x.parquet"
    pq.write_table(pa.table({"timestamp": [T0, T0, T0, None], "topology": ["t"] * 4, "task": [3.0, 3.5, 4.0, 5.0],
                             "load": [0.5, 1.0, -2.0, 1.0]}), path)
    batches = list(native_reader.read_file(path, "load"))
    checked = row_checks.validate(batches[0][0], "load", RANGE)
    assert _reasons(checked) == [None, row_checks.WRONG_TYPE, row_checks.NEGATIVE, row_checks.MISSING]
    assert checked.values["task"][0] == 3
    assert checked.values["operator"].to_pylist() == ["task"] * 4  # no operator column: "task"


def test_jsonl_values_as_text_and_broken_lines(tmp_path):
    path = tmp_path / "traffic-x.jsonl"
    path.write_text("\n".join([
        json.dumps({"timestamp": T0, "topology": "t", "src_task": 1, "dst_task": 2, "tuples": 4, "bytes": 8}),
        json.dumps({"timestamp": str(T0), "topology": "t", "src_task": "1", "dst_task": 2, "tuples": "4"}),
        json.dumps({"timestamp": T0, "topology": "t", "src_task": True, "dst_task": 2, "tuples": 4}),
        "[1, 2]",
        '{"timestamp": ',
        "",
    ]) + "\n")
    blocks = pa.Table.from_batches(list(read_blocks(str(path), "traffic", RANGE)), schema=BLOCK)
    by_part = {p: blocks.filter(pa.compute.equal(blocks["part"], p)) for p in ("block", "rejected", "count")}
    assert by_part["count"]["rows"].to_pylist() == [5]  # the empty line is not a record
    assert sorted(by_part["rejected"]["reason"].to_pylist()) == [row_checks.MALFORMED, row_checks.MALFORMED, row_checks.WRONG_TYPE]
    assert by_part["block"]["rows"].to_pylist() == [2]
    ts, counts = floats(by_part["block"]["ts"])
    assert ts.tolist() == [T0, T0] and counts.tolist() == [2]


def test_csv_header_must_name_the_required_columns(tmp_path):
    path = tmp_path / "traffic-bad.csv"
    path.write_text("timestamp,topology,src_task,tuples\n1,t,1,1\n")
    with pytest.raises(InputError, match=r"traffic-bad.csv: line 1: missing column 'dst_task'"):
        native_reader.check_header(path, "traffic")
    native_reader.check_header(tmp_path / "traffic-bad.jsonl", "traffic")  # JSON lines: checked per row


def test_blobs_round_trip_with_nulls_and_slices():
    values = np.arange(7, dtype=float)
    column = blobs(values, np.array([0, 3, 3, 7]))
    got, counts = floats(column)
    assert got.tolist() == values.tolist() and counts.tolist() == [3, 0, 4]
    got, counts = floats(column.slice(1))
    assert got.tolist() == [3.0, 4.0, 5.0, 6.0] and counts.tolist() == [0, 4]
    with_null = pa.concat_arrays([column, pa.nulls(1, pa.binary())])
    assert floats(with_null)[1].tolist() == [3, 0, 4, 0]


@pytest.mark.parametrize("big", [False, True])
def test_pack_puts_each_pair_in_one_block(big):
    base = 1 << 40 if big else 0  # huge ids: the lexicographic fallback of _groups
    rows = {"timestamp": np.array([3.0, 1.0, 2.0, 1.0, 5.0]), "topology": pa.array(["t", "t", "u", "t", "t"]),
            "a": np.array([1, 1, 1, 2, 1]) + base, "b": np.array([2, 2, 2, 1, 2]) + base,
            "v1": np.array([30.0, 10.0, 20.0, 11.0, 50.0]), "v2": np.zeros(5), "source": "f"}
    packed = pack(rows, "traffic")
    blocks = {(t, a - base, b - base): n for t, a, b, n in zip(
        packed.column("topology").to_pylist(), packed.column("a").to_pylist(), packed.column("b").to_pylist(),
        packed.column("rows").to_pylist())}
    assert blocks == {("t", 1, 2): 3, ("t", 2, 1): 1, ("u", 1, 2): 1}
    v1, counts = floats(packed.column("v1"))
    pieces = np.split(v1, np.cumsum(counts)[:-1])
    first = [k for k, (t, a) in enumerate(zip(packed.column("topology").to_pylist(), packed.column("a").to_pylist()))
             if t == "t" and a == 1 + base][0]
    assert sorted(pieces[first].tolist()) == [10.0, 30.0, 50.0]


def _group(kind: str, blocks: list[tuple[list[float], list[float], bool, str]], a: int = 1, b: int | None = 2) -> pa.Table:
    """Blocks of one group: (timestamps, values, checked, source or operator)."""
    batches = []
    for ts, v1, checked, label in blocks:
        rows = {"timestamp": np.array(ts, float), "topology": pa.array(["t"] * len(ts)), "a": np.full(len(ts), a),
                "v1": np.array(v1, float), "source": label}
        if kind == "traffic":
            rows.update(b=np.full(len(ts), b), v2=np.array(v1, float) * 10)
        else:
            rows["operator"] = pa.array([label] * len(ts))
        batches.append(pack(rows, kind, checked))
    return pa.Table.from_batches(batches, schema=BLOCK)


def _rejected(merged: pa.Table) -> list[tuple[str, dict]]:
    bad = merged.filter(pa.compute.equal(merged["part"], "rejected"))
    return sorted((r, json.loads(raw)["timestamp"]) for r, raw in zip(bad["reason"].to_pylist(), bad["raw"].to_pylist()))


def test_merge_keeps_the_smallest_copy_of_a_duplicate():
    checks = MergeWindow(10.0)
    group = _group("traffic", [([T0 + 1, T0 + 2], [5.0, 7.0], True, "f1"), ([T0 + 2, T0 + 9], [6.0, 1.0], True, "f2"),
                               ([T0 + 2], [100.0], False, "log")])
    merged = merge_group(group, checks, None)
    summary = merged.filter(pa.compute.equal(merged["part"], "summary"))
    # The second T0+2 row of the checked blocks is a duplicate; the unchecked row never is.
    assert _rejected(merged) == [(row_checks.DUPLICATE, T0 + 2)]
    bad = merged.filter(pa.compute.equal(merged["part"], "rejected"))
    assert json.loads(bad["raw"][0].as_py())["tuples"] == 7.0 and bad["source"].to_pylist() == ["f1"]
    assert summary["rows"].to_pylist() == [3]  # accepted rows that were still to check
    assert summary["last"].to_pylist() == [T0 + 9]
    ts, _ = floats(summary["ts"])
    v1, _ = floats(summary["v1"])
    assert sorted(zip(ts.tolist(), v1.tolist())) == [(T0 + 1, 5.0), (T0 + 2, 6.0), (T0 + 2, 100.0), (T0 + 9, 1.0)]


def test_merge_marks_every_checked_row_of_an_undeclared_pair():
    checks = MergeWindow(10.0)
    group = _group("traffic", [([T0, T0], [1.0, 1.0], True, "f")], a=1, b=9)
    merged = merge_group(group, checks, {"t": {1, 2}})
    assert _rejected(merged) == [(row_checks.UNKNOWN_TASK, T0), (row_checks.UNKNOWN_TASK, T0)]
    assert merged.filter(pa.compute.equal(merged["part"], "summary"))["rows"].to_pylist() == [0]
    # A topology declaring no task is not checked.
    assert _rejected(merge_group(group, checks, {"other": {1}})) == [(row_checks.DUPLICATE, T0)]


def test_load_duplicates_are_per_operator():
    checks = MergeWindow(10.0)
    group = _group("load", [([T0, T0], [2.0, 1.0], True, "op-a"), ([T0], [3.0], True, "op-b")], b=None)
    merged = merge_group(group, checks, None)
    bad = merged.filter(pa.compute.equal(merged["part"], "rejected"))
    assert [json.loads(r)["load"] for r in bad["raw"].to_pylist()] == [2.0]
    assert merged.filter(pa.compute.equal(merged["part"], "summary"))["operator"].to_pylist() == ["op-a"]


def test_merge_against_brute_force_on_random_groups():
    rng = np.random.default_rng(7)
    for trial in range(40):
        blocks = []
        for k in range(rng.integers(1, 4)):
            n = int(rng.integers(0, 8))
            blocks.append((list(T0 + rng.integers(0, 6, n).astype(float)), list(rng.integers(0, 4, n).astype(float)),
                           bool(rng.random() < 0.8), f"f{k}"))
        if not any(len(b[0]) for b in blocks):
            continue
        end = None if trial % 2 else float(T0 + 4)
        checks = MergeWindow(3.0, end=end)
        merged = merge_group(_group("traffic", blocks), checks, None)
        # Brute force: the first copy (smallest value) of each checked timestamp is kept.
        seen: dict[float, float] = {}
        kept, duplicates = [], 0
        for ts, v1, checked, _ in blocks:
            for t, v in zip(ts, v1):
                if not checked:
                    kept.append((t, v))
                elif t in seen:
                    duplicates += 1
                    seen[t] = min(seen[t], v)
                else:
                    seen[t] = v
        kept += list(seen.items())
        considered = [(t, v) for t, v in kept if end is None or t <= end]
        summary = merged.filter(pa.compute.equal(merged["part"], "summary"))
        assert len(_rejected(merged)) == duplicates
        assert summary["rows"][0].as_py() == len(seen)
        if not considered:
            assert summary["last"][0].as_py() is None
            continue
        last = max(t for t, _ in considered)
        assert summary["last"][0].as_py() == last
        ts, _ = floats(summary["ts"])
        v1, _ = floats(summary["v1"])
        assert sorted(zip(ts.tolist(), v1.tolist())) == sorted((t, v) for t, v in considered if t > last - 3.0)


def test_read_blocks_counts_add_up(tmp_path):
    path = tmp_path / "traffic-a.csv"
    path.write_text("timestamp,topology,src_task,dst_task,tuples,bytes\n"
                    f"{T0},t,1,2,5,50\n{T0},t,1,2,5,50\n{T0},t,1\n{T0},t,1,2,-5,0\n{T0 + 1},t,2,1,1,1\n")
    table = pa.Table.from_batches(list(read_blocks(str(path), "traffic", RANGE)), schema=BLOCK)
    part = table["part"].to_pylist()
    read = sum(r for p, r in zip(part, table["rows"].to_pylist()) if p == "count")
    in_blocks = sum(r for p, r in zip(part, table["rows"].to_pylist()) if p == "block")
    assert (read, in_blocks, part.count("rejected")) == (5, 3, 2)


def test_jsonl_clean_and_broken_files_read_alike(tmp_path):
    lines = [json.dumps({"timestamp": T0 + k, "topology": "t", "src_task": k % 3, "dst_task": 9, "tuples": k})
             for k in range(5000)]
    (tmp_path / "traffic-clean.jsonl").write_text("\n".join(lines) + "\n")  # Arrow's reader
    broken = lines[:10] + ['{"timestamp": '] + lines[10:4500] + ["[1]", '{"a": 1} {"b": 2}'] + lines[4500:]
    (tmp_path / "traffic-broken.jsonl").write_text("\n".join(broken) + "\n")  # line by line

    def summary(name: str) -> tuple[int, list, list]:
        table = pa.Table.from_batches(list(read_blocks(str(tmp_path / name), "traffic", RANGE)),
                                      schema=BLOCK)
        parts = table["part"].to_pylist()
        read = sum(r for p, r in zip(parts, table["rows"].to_pylist()) if p == "count")
        blocks = sorted((a, r) for p, a, r in zip(parts, table["a"].to_pylist(), table["rows"].to_pylist()) if p == "block")
        return read, blocks, [r for p, r in zip(parts, table["raw"].to_pylist()) if p == "rejected"]

    clean, dirty = summary("traffic-clean.jsonl"), summary("traffic-broken.jsonl")
    assert clean[0] == 5000 and clean[2] == [] and clean[1] == [(0, 1667), (1, 1667), (2, 1666)]
    assert dirty[0] == 5003 and dirty[1] == clean[1]
    assert sorted(dirty[2]) == sorted(['{"timestamp":', "[1]", '{"a": 1} {"b": 2}'])  # lines stripped


def test_parquet_with_unusable_columns(tmp_path):
    # A binary count is a wrong type (its raw record still written); a struct topology cannot
    # be taken as text: the whole file is one error row, which ingest raises as an InputError.
    binary = tmp_path / "traffic-bin.parquet"
    pq.write_table(pa.table({"timestamp": [float(T0)], "topology": ["t"], "src_task": [1], "dst_task": [2],
                             "tuples": pa.array([b"\x01"], pa.binary())}), binary)
    table = pa.Table.from_batches(list(read_blocks(str(binary), "traffic", RANGE)), schema=BLOCK)
    assert table["reason"].to_pylist() == [row_checks.WRONG_TYPE, "read"]
    nested = tmp_path / "traffic-nested.parquet"
    pq.write_table(pa.table({"timestamp": [float(T0)], "topology": [{"x": 1}], "src_task": [1], "dst_task": [2],
                             "tuples": [1.0]}), nested)
    table = pa.Table.from_batches(list(read_blocks(str(nested), "traffic", RANGE)), schema=BLOCK)
    assert table["part"].to_pylist() == ["error"]
    assert table["raw"][0].as_py().startswith(f"{nested}: ")


def test_parquet_reads_like_csv_of_the_same_rows(tmp_path):
    """Parquet's text columns come as dictionaries and its numbers typed (no parsing): the same
    rows written as CSV give the same reasons, values and blocks; " t " and "t" are one topology."""
    rows = [  # timestamp, topology, src, dst, tuples, bytes -> reason
        (T0, "t", 1, 2, 5.0, 50.0, None),
        (T0 + 1, " t ", 1, 2, 6.0, None, None),        # trimmed: the same pair's block; no bytes = 0
        (T0 + 2, "u", 3, 2, 7.0, 1.0, None),
        (T0, "", 1, 2, 5.0, 1.0, row_checks.MISSING),
        (T0, None, 1, 2, 5.0, 1.0, row_checks.MISSING),
        (T0, "t", None, 2, 5.0, 1.0, row_checks.MISSING),
        (T0, "t", 1 << 62, 2, 5.0, 1.0, row_checks.WRONG_TYPE),   # beyond the integer range checked
        (T0, "t", 1, 2, -1.0, 1.0, row_checks.NEGATIVE),
        (T0, "t", 1, 2, float("nan"), 1.0, row_checks.NEGATIVE),
        (5, "t", 1, 2, 5.0, 1.0, row_checks.OUT_OF_RANGE),
    ]
    fields = native_reader.TRAFFIC_FIELDS
    parquet = tmp_path / "traffic-a.parquet"
    pq.write_table(pa.table({f: [r[k] for r in rows] for k, f in enumerate(fields)}), parquet)
    csv = tmp_path / "traffic-a.csv"
    text = {None: "", 1 << 62: str(1 << 62)}
    csv.write_text(",".join(fields) + "\n" + "".join(
        ",".join(text.get(v, str(v)) if not isinstance(v, float) else ("nan" if v != v else repr(v)) for v in r[:6])
        + "\n" for r in rows))
    columns = next(iter(native_reader.read_file(parquet, "traffic")))[0]
    assert pa.types.is_dictionary(columns["topology"].type) and pa.types.is_integer(columns["src_task"].type)
    checked = row_checks.validate(columns, "traffic", RANGE)
    as_text = row_checks.validate(next(iter(native_reader.read_file(csv, "traffic")))[0], "traffic", RANGE)
    assert _reasons(checked) == _reasons(as_text) == [r[-1] for r in rows]
    good = checked.reason == 0
    for f in ("timestamp", "src_task", "dst_task", "tuples", "bytes"):
        assert checked.values[f][good].tolist() == as_text.values[f][good].tolist()
    assert checked.values["topology"].to_pylist()[:3] == ["t", "t", "u"]

    def blocks(path):
        table = pa.Table.from_batches(list(read_blocks(str(path), "traffic", RANGE)), schema=BLOCK)
        table = table.filter(pa.compute.equal(table["part"], "block"))
        return sorted((t, a, b, n, floats(table["ts"].slice(k, 1))[0].tolist()) for k, (t, a, b, n) in
                      enumerate(zip(*(table[c].to_pylist() for c in ("topology", "a", "b", "rows")))))

    assert blocks(parquet) == blocks(csv) == [("t", 1, 2, 2, [T0, T0 + 1]), ("u", 3, 2, 1, [T0 + 2])]
