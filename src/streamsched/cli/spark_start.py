"""Starting Spark while the command line is still being read.

A command that runs on Spark (:data:`SPARK_COMMANDS`) waits seconds for the JVM, as long as or
longer than importing the command modules and reading the options. :func:`start_early` starts
the session in a background thread as soon as the command's name is known (``run`` calls it
before importing any command module); :func:`session` hands that session to the command, or
starts one when none was started early (``main`` called by tests, another master). Standard
library only, so that this module costs nothing to import.
"""

from __future__ import annotations

import threading
from typing import Any

#: Commands that start a Spark session.
SPARK_COMMANDS = ("ingest", "watch", "run", "demo")
DEFAULT_MASTER = "local[2]"

_early: dict[str, "_Start"] = {}


class _Start(threading.Thread):
    """``spark_session(master)`` in a daemon thread (a command that fails first does not wait
    for it; the JVM ends with the process), which then warms the session's Python workers
    (:func:`~streamsched.pipeline.session.warm_python_workers`) while the command, handed the
    session as soon as it is ``ready``, plans its jobs."""

    def __init__(self, master: str):
        super().__init__(name="streamsched-spark-start", daemon=True)
        self.master = master
        self.session: Any = None
        self.error: BaseException | None = None
        self.ready = threading.Event()

    def run(self) -> None:
        try:
            from streamsched.pipeline.session import spark_session, warm_python_workers

            self.session = spark_session(self.master)
        except BaseException as exc:  # handed to the command that asks for the session
            self.error = exc
            return
        finally:
            self.ready.set()
        warm_python_workers(self.session)


def command_of(argv: list[str]) -> tuple[str | None, list[str]]:
    """(command, its arguments): the first argument that is not an option."""
    for k, arg in enumerate(argv):
        if not arg.startswith("-"):
            return arg, argv[k + 1:]
    return None, []


def master_of(args: list[str]) -> str:
    """The value of ``--master`` among a command's arguments (the last one given wins)."""
    master = DEFAULT_MASTER
    for k, arg in enumerate(args):
        if arg == "--master" and k + 1 < len(args):
            master = args[k + 1]
        elif arg.startswith("--master="):
            master = arg.split("=", 1)[1]
    return master


def start_early(argv: list[str]) -> str | None:
    """Start the session of a Spark command in the background; returns its master, or None
    when ``argv`` is no Spark command (or asks for ``--help``)."""
    command, args = command_of(argv)
    if command not in SPARK_COMMANDS or "--help" in args:
        return None
    master = master_of(args)
    if master not in _early:
        _early[master] = _Start(master)
        _early[master].start()
    return master


def session(master: str) -> Any:
    """The session started early for ``master``, waiting for it; else a new one."""
    started = _early.pop(master, None)
    if started is None:
        from streamsched.pipeline.session import spark_session

        return spark_session(master)
    started.ready.wait()
    if started.error is not None:
        raise started.error
    return started.session
