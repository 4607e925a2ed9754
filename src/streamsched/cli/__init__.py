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


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising (also used by the tests)."""
    try:
        app(args=argv, prog_name="streamsched", standalone_mode=False)
    except StreamschedError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except Exception as exc:  # click's usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click.exceptions.Abort):
            return 130
        raise
    return 0


def run() -> None:
    sys.exit(main())
