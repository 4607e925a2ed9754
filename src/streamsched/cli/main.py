"""The ``streamsched`` command line: each command parses options, calls one library function,
renders the result, and maps errors to exit codes (0 ok, 2 bad input, 3 infeasible, 4 some
schedulers of a ``compare`` failed while the others' rows were written).

``--help`` shows the commands' docstrings as plain text (:mod:`.help`).

``--verbose`` (before the command) logs streamsched's DEBUG messages to stderr, among them what
native libraries (METIS, KaHIP, solvers) printed: :mod:`streamsched.native_output` keeps that
off stdout.

Topic modules (``streamsched.cli.<topic>``) add their commands to :data:`.app.app` when
:func:`main` first runs: ``run`` first starts the Spark session of a Spark command in the
background (:mod:`.spark_start`), so that the JVM starts while the command modules load.
"""

from __future__ import annotations

import importlib
import logging
import sys

import typer
from typer.exceptions import Abort, TyperException

from streamsched.cli.app import app, err_console
from streamsched.cli import spark_start
from streamsched.cli.help import tidy
from streamsched.errors import StreamschedError

#: The modules that add commands to :data:`.app.app` (imported by :func:`load_commands`).
TOPICS = ("core", "costs", "edge", "engines", "evaluation", "live", "optimal", "pipeline")
#: The topic of the commands that are worth loading alone (those of the monitoring pipeline, and
#: read-engine, whose deadlines should not wait for imports: the others' matplotlib, solvers and
#: engine readers take seconds to import on a busy machine).
COMMAND_TOPIC = {**{name: "pipeline" for name in ("gen-metrics", "ingest", "watch", "export", "run", "demo", "collect")},
                 "read-engine": "engines"}

#: Name of the stderr handler ``--verbose`` adds to the ``streamsched`` logger.
VERBOSE_HANDLER = "streamsched-verbose"


@app.callback()
def global_options(
    verbose: bool = typer.Option(False, "--verbose", help="log DEBUG messages (native libraries' output among them) to stderr"),
) -> None:
    """Place stream-processing tasks on clusters and compare schedulers."""
    set_verbose(verbose)


def set_verbose(verbose: bool) -> None:
    """Route the ``streamsched`` loggers' DEBUG messages to stderr, or stop doing so."""
    logger = logging.getLogger("streamsched")
    for handler in [h for h in logger.handlers if h.get_name() == VERBOSE_HANDLER]:
        logger.removeHandler(handler)
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(VERBOSE_HANDLER)
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.NOTSET)


def load_commands(command: str | None) -> None:
    """Import the topic module of ``command`` (:data:`COMMAND_TOPIC`), or every topic module
    when the command is not listed there or not found in its module (``--help``, a typo)."""
    topic = COMMAND_TOPIC.get(command or "")
    if topic is not None:
        importlib.import_module(f"streamsched.cli.{topic}")
        names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
        if command in names | {g.name for g in app.registered_groups}:
            return
    for name in TOPICS:
        importlib.import_module(f"streamsched.cli.{name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of exiting (also used by the tests).

    Every error prints one line: usage errors (unknown command or option, a bad option value:
    exit 2), ours (the exit code of the :class:`~streamsched.errors.StreamschedError`), and
    what the operating system refused (a missing output directory, a directory given as a file:
    exit 2, naming the path). ``--verbose``'s handler goes with the call (a caller that runs
    commands in turn, the tests, keeps no handler on a stream of an earlier command).
    """
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    finally:
        set_verbose(False)


def _main(args: list[str]) -> int:
    load_commands(spark_start.command_of(args)[0])
    try:
        command = tidy(typer.main.get_command(app))
        result = command(args=args, prog_name="streamsched", standalone_mode=False)
    except TyperException as exc:  # usage errors: typer's (vendored click) exceptions
        context = getattr(exc, "ctx", None)
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        return _fail(f"{exc.format_message()}{hint}", exc.exit_code)
    except Abort:
        return _fail("aborted", 130)
    except StreamschedError as exc:
        return _fail(str(exc), exc.exit_code)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 2)
    except MemoryError:
        return _fail("out of memory: the input is too large for this machine", 2)
    except Exception as exc:  # a Spark (Py4J, PySpark) failure: one line, the trace with --verbose
        from streamsched.pipeline import spark_errors

        if not spark_errors.is_spark_failure(exc):
            raise
        logging.getLogger("streamsched.spark").debug("Spark's trace", exc_info=exc)
        message, code = spark_errors.describe(exc)
        return _fail(f"{message} (--verbose for the trace)", code)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return result if isinstance(result, int) else 0


def _fail(message: str, code: int) -> int:
    err_console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True, markup=True)
    return code


def run() -> None:
    """The console script: a Spark command's session starts before the command modules load."""
    argv = sys.argv[1:]
    command, _ = spark_start.command_of(argv)
    if command in spark_start.SPARK_COMMANDS:
        set_verbose("--verbose" in argv[:argv.index(command)])  # Spark's log level depends on it
    spark_start.start_early(argv)
    sys.exit(main(argv))
