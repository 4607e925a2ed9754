"""``watch --apply-flink``'s wiring (the collector thread, stopping between steps) and
``streamsched journal``, the live loop's journal read back (summary, HTML page with its picture)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

from streamsched.cli.app import app, err_console
from streamsched.cli.common import JsonOpt, emit
from streamsched.errors import InputError


def make_loop(url: str, job_id: Optional[str], directory: Path, scheduler: Any, cluster: Any, options: dict,
              seed: int, window: float, out: Path, journal: Optional[Path], min_gain_pct: float, confirm: int,
              payback: float, dry_run: bool, load_unit: str, record_apply=None):
    """The :class:`~streamsched.pipeline.live_loop.LiveLoop` of ``watch --apply-flink URL``: its
    collector reads the job into ``directory`` (the watch's input), plans go to ``out``, the
    journal to ``journal`` (default ``out/journal.jsonl``)."""
    from streamsched.pipeline.live_loop import GridCollector, LiveLoop

    if load_unit != "cores":
        raise InputError("--apply-flink: the Flink collector writes loads in cores; give --load-unit cores and a "
                         "cluster in cores (e.g. the lab's cluster.yaml)")
    if not (min_gain_pct == min_gain_pct and min_gain_pct > -100):
        raise InputError(f"--min-gain: {min_gain_pct!r}; must be a percentage > -100")
    collector = GridCollector(url, directory, job_id)
    loop = LiveLoop(scheduler, cluster, collector, collector.rest.url, collector.job_id,
                    journal or out / "journal.jsonl", window, out, replan_options=options, seed=seed,
                    min_gain=min_gain_pct / 100, confirm=confirm, payback=payback, dry_run=dry_run,
                    log=lambda message: err_console.print(f"live loop: {message}", highlight=False, soft_wrap=True),
                    **({"record_apply": record_apply} if record_apply else {}))
    err_console.print(f"live loop on job {collector.job_id} at {collector.rest.url}: journal {loop.journal}"
                      + (" (dry run: nothing is applied)" if dry_run else ""), highlight=False)
    return loop


@contextmanager
def running(loop, window: float) -> Iterator[None]:
    """The collector's thread (reading once per window) while the watch runs, and SIGINT/SIGTERM
    handlers that stop the watch between steps: at once, or after the apply in progress is
    journalled (:meth:`LiveLoop.request_stop` sets ``loop.stopped``, which the watch's
    ``run(stop=...)`` waits for)."""
    stop = threading.Event()
    thread = threading.Thread(target=loop.collector.follow_grid, name="live-loop-collector", daemon=True,
                              args=(window, stop, lambda message: err_console.print(
                                  f"live loop: {message}", highlight=False, soft_wrap=True)))

    def handler(signum, _frame):
        if not loop.request_stop():
            err_console.print(f"{signal.Signals(signum).name}: stopping once the apply in progress is journalled",
                              highlight=False)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    thread.start()
    try:
        yield
    finally:
        stop.set()
        for s, h in previous.items():
            signal.signal(s, h)
        thread.join(timeout=60)


@app.command("journal")
def journal(
    path: Path = typer.Argument(..., help="the live loop's journal (watch --apply-flink ... --journal FILE)"),
    html: Optional[Path] = typer.Option(None, "--html", help="write a page with the loop's timeline picture here"),
    as_json: bool = JsonOpt,
) -> None:
    """The live loop's journal: windows (complete: one line each, none missing or twice),
    decisions by kind, each apply with its moved subtasks, downtime, and the measured value
    before and after beside the prediction; --html draws measured throughput and remote bytes
    per window with the decisions marked."""
    from streamsched.cli.summaries import journal_lines
    from streamsched.pipeline.live_loop import read_journal, summary

    rows = read_journal(path)
    result = summary(rows)
    if html is not None:
        from streamsched.evaluation.report import write_loop_report

        result["html"] = str(write_loop_report(html, rows, result, title=f"live loop: {path.name}"))
    emit(result, as_json, journal_lines(result))
