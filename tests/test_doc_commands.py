"""Every documented command runs, as written (issue 34, item 2).

Which lines are commands (README.md, "Usage", says the same for writers):

- the fenced blocks of README.md and docs/*.md whose info string is empty or ``sh`` (other
  languages, ``yaml``, ``json``, ``java``, ``python``, are not shell);
- in them, each logical line (a trailing ``\\`` or ``|`` continues it) whose code, its ``#``
  comment removed, calls ``streamsched`` is a documented command;
- ``<!-- not-run: REASON -->`` as the last non-blank line before the opening fence: none of the
  block's commands runs (synopses with ``[options]``, an engine's installation);
- ``needs: WHAT`` or ``not-run: REASON`` in a command's trailing comment: that command does not
  run (it needs a server at its ``--url``, a running job, Ctrl-C to stop ...);
- ``exits N`` in the trailing comment: the command must exit N; otherwise 0.

An exclusion without its reason fails :func:`test_exclusions_give_their_reason`; every other
command runs in a scratch directory of its own (cwd), through the console script
``.venv/bin/streamsched`` (a line with shell syntax, ``&&``, ``for``, ``$e``, through
``bash -c`` with that script first on PATH), must exit as stated and print no traceback. The
files a command names are made first by :data:`INPUTS` and :data:`SPARK_INPUTS` (fixtures, the
README's own cluster file, a placement of the command's own workload and cluster by ``even``),
nothing else; what a command leaves running is ended by :data:`TEARDOWN`.

Tiers: a command of :data:`~streamsched.cli.spark_start.SPARK_COMMANDS`, or one whose inputs need
Spark, is marked ``spark``; the commands in :data:`SLOW` (each longer than a few seconds,
measured) and those that start Flink ``slow``; the rest runs in ``make test-fast``. Tests are
named ``FILE:LINE``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamsched.cli.spark_start import SPARK_COMMANDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPT = Path(sys.executable).with_name("streamsched")
FIXTURES = ROOT / "tests" / "fixtures"
NIMBUS = ROOT.parents[1] / "shared" / "peers" / "storm-clusterconf" / "largeCluster01"
if not NIMBUS.is_dir():
    NIMBUS = Path("/work/shared/peers/storm-clusterconf/largeCluster01")

SHELL_INFO = {"", "sh"}
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_BLOCK_MARK = re.compile(r"^<!--\s*not-run:(.*?)-->\s*$")
_LINE_MARK = re.compile(r"\b(needs|not-run):\s*([^;]*)")
_EXITS = re.compile(r"\bexits (\d+)\b")
_CALLS = re.compile(r"(?:^|[;&|(]|\bdo|\bnice|\$\()\s*streamsched(?=\s|$)")
_SHELL_SYNTAX = re.compile(r"&&|\|\||[|;$`<>&]|^\s*(for|while|if)\b")
#: Options whose value a command writes (never made beforehand).
OUTPUT_OPTIONS = {"-o", "--out", "--report", "--store"}

#: Commands longer than a few seconds (busy 2-core machine, one run each): a regex on the command, why.
SLOW = {
    r"--schedulers all\b": "every scheduler with its defaults (caps, optimal): 17-19 s",
    r"-w caps-Q2-join-256 .*time_limit=60": "optimal's contention model on 256 tasks: 18 s",
    r"-w caps-q8 .*compute_ceiling=18000": "optimal's contention model, network-total: 49 s",
    r"\breproduce micro-optimum\b": "the experiment's grid: 48 s",
    r"\breproduce fischer -o": "the experiment's full grid",
    r"--strategy topset,topset-p,ga-i": "24 edge simulations",
    r"--graph edges.csv .*optimal --param time_limit=30": "optimal on the 25-task edges.csv: 4-20 s",
    r"\bread-engine storm-nimbus DIR\b": "50 stored topologies decoded: 24 s CPU",
    r"\bschedule-many --nimbus DIR\b": "50 topologies placed twice: 9 s CPU",
    r"replan current.json -w wordcount -c high-low-1-2 --migration-cost 5": "optimal with moves priced: 9 s CPU",
}


#: Commands that leave something running: a regex on the command, the command (in its scratch
#: directory) that ends it, run also when the test fails.
TEARDOWN = {r"\bflink-local start\b": ["flink-local", "stop"]}


@dataclass(frozen=True)
class DocCommand:
    file: str
    line: int
    text: str  # the command as a shell line (continuations joined, comment kept)
    code: str  # without the trailing comment
    comment: str
    block_reason: str | None  # the block's not-run reason ("" when the mark has none)

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def excluded(self) -> str | None:
        """Why the command does not run (``""``: marked without a reason), or None."""
        if self.block_reason is not None:
            return self.block_reason
        mark = _LINE_MARK.search(self.comment)
        if mark is None:
            return None
        return (f"needs {mark.group(2).strip()}" if mark.group(1) == "needs" and mark.group(2).strip()
                else mark.group(2).strip())

    @property
    def exit_code(self) -> int:
        stated = _EXITS.search(self.comment)
        return int(stated.group(1)) if stated else 0

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.code)


def _split_comment(line: str) -> tuple[str, str]:
    """Code and trailing comment of one shell line (a ``#`` outside quotes after a blank)."""
    quote = None
    for k, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip(), line[k + 1:].strip()
    return line.rstrip(), ""


def collect(paths=DOCS) -> list[DocCommand]:
    """The documented commands of ``paths`` by the convention above."""
    commands = []
    for path in paths:
        lines = path.read_text().splitlines()
        name = str(path.relative_to(ROOT))
        k = 0
        while k < len(lines):
            fence = _FENCE.match(lines[k])
            if not fence:
                k += 1
                continue
            before = next((lines[j] for j in range(k - 1, -1, -1) if lines[j].strip()), "")
            mark = _BLOCK_MARK.match(before.strip())
            block_reason = mark.group(1).strip() if mark else None
            shell = fence.group(2) in SHELL_INFO
            k += 1
            pending: list[str] = []
            start = 0
            while k < len(lines) and not lines[k].strip().startswith("```"):
                if shell:
                    code, comment = _split_comment(lines[k])
                    if not pending:
                        start = k + 1
                    pending.append(lines[k])
                    if not (code.endswith("\\") or code.endswith("|") or _open_loop(pending)):
                        commands.append(_logical(name, start, pending, block_reason))
                        pending = []
                k += 1
            if pending:
                commands.append(_logical(name, start, pending, block_reason))
            k += 1
    return [c for c in commands if c is not None]


def _open_loop(physical: list[str]) -> bool:
    """A ``for``/``while`` loop begun and not yet closed by ``done``."""
    words = " ".join(_split_comment(line)[0] for line in physical).replace(";", " ").split()
    return words.count("do") > words.count("done")


def _logical(name: str, start: int, physical: list[str], block_reason: str | None) -> DocCommand | None:
    code, comments = "", []
    for line in physical:  # a trailing backslash joins with a blank, a pipe or a loop's line with a newline
        part, comment = _split_comment(line)
        if part.endswith("\\"):
            code += part[:-1].strip() + " "
        elif part.strip():
            code += part.strip() + "\n"
        if comment:
            comments.append(comment)
    code = code.strip()
    if not _CALLS.search(code):
        return None
    comment = "; ".join(comments)
    text = code + (f"   # {comment}" if comment else "")
    return DocCommand(name, start, text, code, comment, block_reason)


COMMANDS = collect()


# -- inputs: what a command names, made in its scratch directory -------------------------------

def _option(argv: list[str], *names: str) -> str | None:
    for k, token in enumerate(argv[:-1]):
        if token in names:
            return argv[k + 1]
    return None


def _outputs(argv: list[str]) -> set[str]:
    return {argv[k + 1] for k, token in enumerate(argv[:-1]) if token in OUTPUT_OPTIONS}


def _readme_cluster(where: Path) -> None:
    """cluster.yaml: the README's own cluster example (section "Cluster files")."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```yaml\n(name: heterogeneous\n.*?)```", text, re.S)
    assert block, "README.md: the cluster example (```yaml name: heterogeneous) is gone"
    (where / "cluster.yaml").write_text(block.group(1))


def _edges(where: Path) -> None:
    """edges.csv (+ edges.tasks.csv): wordcount's graph as a CSV graph file."""
    from streamsched import resolve
    from streamsched.model.graph_files import write_graph

    write_graph(resolve.graph("wordcount"), where / "edges.csv")


def _now(where: Path) -> None:
    """now/: what ``read-engine storm-ui --url`` leaves, read from the recorded Storm UI answers."""
    fixture = FIXTURES / "storm_ui" / "wordcount"
    done = subprocess.run([str(SCRIPT), "read-engine", "storm-ui", "--dir", str(fixture), "--out", "now"],
                          cwd=where, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    shutil.copytree(fixture, where / "now" / "storm-ui")


def _nimbus(where: Path) -> None:
    """DIR: Nimbus's stored topologies of Storm's TestLargeCluster (largeCluster01)."""
    if not NIMBUS.is_dir():
        pytest.skip("Storm's clusterconf files are not beside the project")
    (where / "DIR").symlink_to(NIMBUS, target_is_directory=True)


def _demo_cluster(where: Path) -> None:
    """out/demo/cluster.json: fischer-11, as ``make demo`` writes it."""
    from streamsched import resolve

    (where / "out" / "demo").mkdir(parents=True)
    (where / "out" / "demo" / "cluster.json").write_text(json.dumps(resolve.cluster("fischer-11").to_dict()))


def _metrics(where: Path) -> None:
    """metrics/: ``gen-metrics -w diamond-30`` at a fifth of its default rows."""
    from streamsched import resolve
    from streamsched.pipeline.generate import generate_metrics

    generate_metrics(resolve.graph("diamond-30"), where / "metrics", rows=20_000, seed=0)


def _tests(where: Path) -> None:
    """tests/: the repository's (a doc naming ``tests/fixtures/...`` means from the repository's root)."""
    (where / "tests").symlink_to(ROOT / "tests", target_is_directory=True)


#: Inputs by the path a command names (first component), in the order they are made.
def _src(where: Path) -> None:
    """src/: the repository's (a doc naming ``src/streamsched/data/...`` means a file the package ships)."""
    (where / "src").symlink_to(ROOT / "src", target_is_directory=True)


INPUTS = {"cluster.yaml": _readme_cluster, "edges.csv": _edges, "now": _now, "DIR": _nimbus,
          "out/demo/cluster.json": _demo_cluster, "metrics": _metrics, "tests": _tests, "src": _src}


def _store(where: Path, argv: list[str], spark) -> None:
    """store/: windows of wordcount on homogeneous-10 under the command's ``--placement`` files
    (``even``'s, ``metis``'s, ``i-scheduler``'s: they differ in which tasks share a worker), CPU
    costs known, ingested phase by phase as docs/evaluation.md's measurement is (at a tenth of its
    rows)."""
    from streamsched import resolve
    from streamsched.model.costs import parse_cost_model
    from streamsched.pipeline.generate import generate_metrics
    from streamsched.pipeline.ingest import Window, ingest
    from streamsched.pipeline.sources import Options
    from streamsched.schedulers import get_scheduler

    graph, cluster = resolve.inputs("wordcount", None, "homogeneous-10", units=False)
    names = [argv[k + 1] for k, token in enumerate(argv[:-1]) if token == "--placement"]
    placements = [get_scheduler(s).schedule(graph, cluster) for s in ("even", "metis", "i-scheduler")[:len(names)]]
    for name, placement in zip(names, placements):
        placement.write(where / name, graph, cluster)
    costs = parse_cost_model(["spout=5us", "split=20us", "count=10us"], "15us")
    summary = generate_metrics(graph, where / "m", rows=13_600, placement=placements, cluster=cluster, seed=1,
                               rate_scale=100, costs=costs)
    for phase in summary["phases"]:
        ingest(spark, [where / "m"], where / "store", Window(seconds=phase["window_s"], end=phase["until"]),
               Options(load_unit="cores"))


#: Inputs made with Spark (the command is marked ``spark``).
SPARK_INPUTS = {"store": _store}


def _placement(where: Path, name: str, argv: list[str]) -> None:
    """A placement file the command reads: ``even``'s on the command's own workload and cluster."""
    from streamsched import resolve
    from streamsched.schedulers import get_scheduler

    graph, cluster = resolve.inputs(_option(argv, "-w", "--workload"), _option(argv, "--graph", "-g"),
                                    _option(argv, "-c", "--cluster"))
    get_scheduler("even").schedule(graph, cluster).write(where / name, graph, cluster)


def _named(argv: list[str]) -> set[str]:
    """First path components of the arguments a command reads (not the values of output options)."""
    written = _outputs(argv)
    return {t if t in INPUTS else t.split("/")[0] for t in argv if not t.startswith("-") and t not in written}


def prepare(command: DocCommand, where: Path, spark) -> None:
    """Make in ``where`` the files ``command`` names that it does not write itself (``spark()``
    gives the session for :data:`SPARK_INPUTS`)."""
    with contextlib.chdir(where):  # the command's relative paths are the scratch directory's
        _prepare(command.argv, where, spark)


def _prepare(argv: list[str], where: Path, spark) -> None:
    written, named = _outputs(argv), _named(argv)
    for key, make in INPUTS.items():
        if key in named:
            make(where)
    for key, make in SPARK_INPUTS.items():
        if key in named:
            make(where, argv, spark())
    for k, token in enumerate(argv):
        if (token.endswith(".json") and "/" not in token and token not in written and not (where / token).exists()
                and (k == 0 or argv[k - 1] in ("--placement",) or not argv[k - 1].startswith("-"))):
            _placement(where, token, argv)


# -- tiers -------------------------------------------------------------------------------------

def _subcommands(command: DocCommand) -> list[str]:
    words = command.code.split()
    return [words[k + 1] for k, word in enumerate(words[:-1]) if word.endswith("streamsched")]


def _starts_flink(command: DocCommand) -> bool:
    return any(re.search(pattern, command.code) for pattern in TEARDOWN)


def _marks(command: DocCommand) -> list:
    marks = []
    if (any(sub in SPARK_COMMANDS for sub in _subcommands(command)) or "--engine spark" in command.code
            or SPARK_INPUTS.keys() & _named(command.argv)):
        marks.append(pytest.mark.spark)
    if any(re.search(pattern, command.code) for pattern in SLOW) or _starts_flink(command):
        marks.append(pytest.mark.slow)
    return marks


def _params():
    for command in COMMANDS:
        if command.excluded is None:
            yield pytest.param(command, id=command.name, marks=_marks(command))


# -- tests -------------------------------------------------------------------------------------

def test_the_docs_have_commands_and_every_one_is_run_or_excused():
    """The collector finds what the docs show (a change of convention cannot empty the test)."""
    run = [c.code for c in COMMANDS if c.excluded is None]
    assert "streamsched schedule -s optimal -w caps-Q3 -c caps-4x8 -p objective=contention" in run
    assert len([c for c in COMMANDS if c.excluded is None]) >= 20
    assert all(c.excluded is None or c.excluded for c in COMMANDS)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.excluded is not None], ids=lambda c: c.name)
def test_exclusions_give_their_reason(command):
    assert command.excluded, f"{command.name}: {command.text!r} is marked not to run but gives no reason"


@pytest.mark.parametrize("command", list(_params()))
def test_documented_command_runs(command, tmp_path, request):
    prepare(command, tmp_path, lambda: request.getfixturevalue("spark"))
    env = dict(os.environ, PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if _SHELL_SYNTAX.search(command.code):
        argv = ["bash", "-c", f"set -o pipefail; {command.code}"]
    else:
        argv = command.argv
        if argv[0] == "streamsched":
            argv[0] = str(SCRIPT)
        elif argv[:2] == ["nice", "streamsched"]:
            argv[1] = str(SCRIPT)
    timeout = 1800 if any(m.name in ("slow", "spark") for m in _marks(command)) else 300
    try:
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    finally:
        for pattern, stop in TEARDOWN.items():
            if re.search(pattern, command.code):
                subprocess.run([str(SCRIPT), *stop], cwd=tmp_path, capture_output=True, timeout=300)
    said = f"{command.name}: {command.text}\nexit {done.returncode}\n{done.stderr[-2000:]}"
    assert done.returncode == command.exit_code, said
    assert "Traceback" not in done.stderr, said
