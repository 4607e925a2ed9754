"""Mutation testing of one module with its fast tests: ``make mutate MODULE=schedulers/caps.py``.

mutmut 3 writes its mutated copy (``mutants/``) where it runs, so the run happens in a scratch
copy, ``build/mutate-<module>/`` (git ignores ``build/``), of the working tree's ``src/``,
``tests/`` and ``pyproject.toml`` (or of a commit's: ``REV=HEAD``), never in the work tree. Only
``MODULE`` is mutated, and only the test files :data:`TESTS` maps it to run, in the fast tier
(``-m "not spark and not slow"``, ``STREAMSCHED_TEST_TIER=fast``). Every run starts from no
mutants (mutmut would not re-test a survivor after a new test). The last line is
``MODULE: killed/total = score`` (a timeout counts as killed; a mutant that no selected test
reaches counts as a survivor; with mutant names or globs given, only those count);
``build/mutate-<module>/survivors.txt`` lists the others
(``mutmut show NAME`` in that directory prints one's diff).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "src/streamsched"
FAST = ["-m", "not spark and not slow"]

#: Module (under src/streamsched) -> the fast test files that exercise it; ``tests/test_pin_<name>.py``
#: (name: the module's file name, or ``<package>_<file name>`` where two modules share one) joins by itself.
TESTS = {
    "schedulers/storm_ras.py": ["tests/test_storm_ras.py"],
    "engines/storm/nimbus.py": ["tests/test_storm_nimbus.py"],
    "model/contention.py": ["tests/test_contention.py"],
    "schedulers/caps.py": ["tests/test_contention.py"],
    "solvers/contention.py": ["tests/test_contention.py"],
    "schedulers/optimal.py": ["tests/test_optimal_scheduler.py", "tests/test_contention.py"],
    "engines/flink/apply.py": ["tests/test_apply_offline.py", "tests/test_faults_offline.py"],
}
#: Fast tests left out of a module's runs (``-k``), each a few seconds of Storm's 140 stored topologies
#: that every surviving mutant of the reader would run again: the score is then a lower bound.
SKIP = {"engines/storm/nimbus.py": "not every_topology and not largecluster03"}
#: Modules whose file name is shared by another module: their pin tests carry the package too.
QUALIFIED = {"model/contention.py": "model_contention", "solvers/contention.py": "solvers_contention"}


def pin_tests(module: str) -> str:
    return f"tests/test_pin_{QUALIFIED.get(module, Path(module).stem)}.py"


def scratch_copy(target: Path, rev: str | None) -> None:
    """``src/``, ``tests/`` and ``pyproject.toml`` of the working tree (or of ``rev``) into ``target``."""
    for name in ("src", "tests", "mutants"):
        shutil.rmtree(target / name, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    if rev:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src", "tests", "pyproject.toml"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    else:
        skip = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.egg-info")
        for name in ("src", "tests"):
            shutil.copytree(ROOT / name, target / name, ignore=skip)
        shutil.copy2(ROOT / "pyproject.toml", target)


def configure(target: Path, module: str, tests: list[str]) -> None:
    """The scratch pyproject.toml's ``[tool.mutmut]``: ``module`` mutated, ``tests`` run (fast tier)."""
    skip = ["-k", SKIP[module]] if module in SKIP else []
    text = (target / "pyproject.toml").read_text()
    text = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", text)  # ours replaces any committed one
    text += ("\n[tool.mutmut]\n"
             'source_paths = ["src/"]\n'
             f"only_mutate = {json.dumps([f'{PACKAGE}/{module}'])}\n"
             f"pytest_add_cli_args_test_selection = {json.dumps(tests + FAST + skip)}\n"
             'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly"]\n'
             # a mutant that loops (e.g. a loop flag never reset) stops after 3 x, not 15 x, its tests'
             # CPU time (x 2, + 1 s): killed as a timeout
             "timeout_multiplier = 3.0\n")
    (target / "pyproject.toml").write_text(text)


def tally(target: Path, module: str) -> tuple[Counter, dict[str, str]]:
    """Status counts of ``module``'s mutants and each non-killed mutant's status, from mutmut's meta file."""
    from mutmut.stats import status_by_exit_code

    meta = json.loads((target / "mutants" / PACKAGE / f"{module}.meta").read_text())
    statuses = {name: status_by_exit_code[code] for name, code in meta["exit_code_by_key"].items()}
    statuses = {name: "killed" if status == "timeout" else status for name, status in statuses.items()}
    return Counter(statuses.values()), {name: s for name, s in sorted(statuses.items()) if s != "killed"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help=f"a module under {PACKAGE}, e.g. schedulers/caps.py")
    parser.add_argument("--rev", help="mutate this commit's tree (e.g. HEAD) instead of the working tree")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutants (default 2)")
    parser.add_argument("mutants", nargs="*", help="only these mutants (mutmut's names or globs)")
    args = parser.parse_intermixed_args(argv)
    module = args.module.removeprefix(f"{PACKAGE}/").removeprefix("streamsched/")
    if module not in TESTS:
        print(f"mutate: no test mapping for {module!r} in scripts/mutate.py (known: {', '.join(TESTS)})",
              file=sys.stderr)
        return 2
    target = ROOT / "build" / f"mutate-{module.removesuffix('.py').replace('/', '-')}"
    scratch_copy(target, args.rev)
    tests = [t for t in TESTS[module] + [pin_tests(module)] if (target / t).exists()]
    if not tests:
        print(f"mutate: none of {module}'s test files exist", file=sys.stderr)
        return 2
    configure(target, module, tests)
    # made now: a directory on PYTHONPATH missing at start-up would stay unsearched in mutmut's process
    (target / "mutants" / "src").mkdir(parents=True)
    # the mutants' pytest sessions keep their temporary directories under the scratch copy: in the
    # shared /tmp/pytest-of-<user> each new session deletes the oldest, those of another test run too
    # (a running Flink's among them)
    (target / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ, STREAMSCHED_TEST_TIER="fast", TMPDIR=str(target / "tmp"),
               # a test's subprocess (the CLI as a command) imports the mutated copy too
               PYTHONPATH=os.pathsep.join([str(target / "mutants" / "src"), os.environ.get("PYTHONPATH", "")]))
    print(f"mutate: {module} in {target.relative_to(ROOT)} with {' '.join(tests)}", flush=True)
    mutmut = Path(sys.executable).parent / "mutmut"
    done = subprocess.run([str(mutmut), "run", "--max-children", str(args.max_children), *args.mutants],
                          cwd=target, env=env)
    if done.returncode != 0:
        print(f"mutate: mutmut exited {done.returncode}", file=sys.stderr)
        return done.returncode
    counts, others = tally(target, module)
    (target / "survivors.txt").write_text("".join(f"{name}\t{s}\n" for name, s in others.items()
                                                  if s != "not checked"))
    # a run limited to some mutants (their names or globs) leaves the others "not checked": not counted
    total = sum(counts.values()) - counts["skipped"] - counts["not checked"]
    rest = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s not in ("killed", "skipped"))
    print(f"mutate: survivors in {(target / 'survivors.txt').relative_to(ROOT)} ({rest or 'none'})")
    print(f"{module}: killed {counts['killed']}/{total} = {100 * counts['killed'] / max(total, 1):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
