"""What every experiment's summary writes: a table as CSV and markdown, figures, notes."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Iterable


def ok_rows(rows):
    """Rows whose scheduler produced a placement."""
    return [r for r in rows if "inter_node_traffic" in r]


def write_table(out_dir: Path, name: str, header: list[str], lines: list[list[Any]], notes: Iterable[str]) -> list[Path]:
    """``name``.csv and ``name``.md with the same table; notes go under the markdown table."""
    csv_path, md_path = out_dir / f"{name}.csv", out_dir / f"{name}.md"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([[_plain(v) for v in line] for line in lines])
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(_fmt(v) for v in line) + " |" for line in lines]
    md += [""] + [f"- {n}" for n in notes]
    md_path.write_text("\n".join(md) + "\n")
    return [csv_path, md_path]


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.4g}"
    return str(v)


def _plain(v: Any) -> Any:
    return "" if v is None else v


def figure(out_dir: Path, name: str, data: bytes) -> Path:
    figures = out_dir / "figures"
    figures.mkdir(exist_ok=True)
    path = figures / f"{name}.png"
    path.write_bytes(data)
    return path


def missing_note(rows) -> list[str]:
    missing = sorted({r["scheduler"] for r in rows if r.get("status") == "missing"})
    failed = sorted({f"{r['scheduler']} on {r['workload']}/{r['cluster']}: {r['status']}" for r in rows
                     if r.get("status") in ("error", "infeasible")})
    notes = []
    if missing:
        notes.append("Not registered, so not run: " + ", ".join(missing) + ".")
    notes += [f"Failed: {f}" for f in failed[:20]]
    return notes
