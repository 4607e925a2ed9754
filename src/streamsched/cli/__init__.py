"""The ``streamsched`` command line: each command parses options, calls one library function,
renders the result, and maps errors to exit codes (0 ok, 2 bad input, 3 infeasible, 4 some
schedulers of a ``compare`` failed while the others' rows were written).

``--verbose`` (before the command) logs streamsched's DEBUG messages to stderr, among them what
native libraries (METIS, KaHIP, solvers) printed: :mod:`streamsched.native_output` keeps that
off stdout.

Topic modules (``streamsched.cli.<topic>``) add their commands to :data:`.app.app`.
"""

from __future__ import annotations

import logging
import sys

import typer

# Topic modules register their commands on import.
from streamsched.cli import core  # noqa: F401
from streamsched.cli import edge  # noqa: F401
from streamsched.cli import engines  # noqa: F401
from streamsched.cli import evaluation  # noqa: F401
from streamsched.cli import optimal  # noqa: F401
from streamsched.cli import pipeline  # noqa: F401
from streamsched.cli.app import app, err_console
from streamsched.errors import StreamschedError

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


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of exiting (also used by the tests).

    Usage errors are reported by typer itself (exit 2); our errors print one line.
    """
    try:
        app(args=argv, prog_name="streamsched", standalone_mode=True)
    except StreamschedError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def run() -> None:
    sys.exit(main())
