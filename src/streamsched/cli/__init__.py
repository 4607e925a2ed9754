"""The ``streamsched`` command line: each command parses options, calls one library function,
renders the result, and maps errors to exit codes (0 ok, 2 bad input, 3 infeasible).

Topic modules (``streamsched.cli.<topic>``) add their commands to :data:`app`.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from streamsched.errors import StreamschedError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Place stream-processing tasks on clusters and compare schedulers.")
err_console = Console(stderr=True)

# Topic modules register their commands on import.
from streamsched.cli import core  # noqa: E402,F401
from streamsched.cli import pipeline  # noqa: E402,F401
from streamsched.cli import edge  # noqa: E402,F401
from streamsched.cli import evaluation  # noqa: E402,F401
from streamsched.cli import optimal  # noqa: E402,F401


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
