"""The typer application every topic module adds its commands to, and the console for errors."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Place stream-processing tasks on clusters and compare schedulers.")
err_console = Console(stderr=True)
