"""The ``streamsched`` command line (:mod:`.main`: entry points, exit codes, ``--verbose``;
topic modules add the commands). The console script is :func:`run`; tests call :func:`main`."""

from streamsched.cli.main import load_commands, main, run

__all__ = ["load_commands", "main", "run"]
