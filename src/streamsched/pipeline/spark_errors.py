"""Spark's failures as one line naming the cause (issue 27): a Py4J or PySpark exception
carries a Java trace of hundreds of lines; the line the user needs is its deepest ``Caused
by:`` (a path that cannot be made, a permission, a stack overflow), or the streamsched error a
``foreachBatch`` raised inside a streaming query. Plain text work: no pyspark import."""

from __future__ import annotations

import re

from streamsched.errors import StreamschedError

_JAVA_EXCEPTION = re.compile(r"^\s*(?:Caused by: )?((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))(?::\s*(.*))?$")
_OURS = re.compile(r"streamsched\.errors\.(\w+Error): (.*)")
_HINTS = (
    (re.compile(r"mkdir|Mkdirs failed|AccessDenied|Permission denied|Read-only file system", re.I),
     "cannot write there (a read-only or foreign directory?)"),
    (re.compile(r"StackOverflowError"), "the JVM's stack overflowed (a query plan too deep)"),
    (re.compile(r"OutOfMemoryError"), "the JVM ran out of memory (raise spark.driver.memory)"),
)


def is_spark_failure(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("py4j", "pyspark"))


def describe(exc: BaseException) -> tuple[str, int]:
    """(one line, exit code) for a Spark failure: a streamsched error raised inside the query
    keeps its message and exit code; else the deepest Java exception with a hint."""
    text = str(exc)
    ours = _OURS.findall(text)
    if ours:
        name, message = ours[-1]
        codes = {cls.__name__: cls.exit_code for cls in _subclasses(StreamschedError)}
        return message.strip().splitlines()[0], codes.get(name, 2)
    found = [m for m in map(_JAVA_EXCEPTION.match, text.splitlines()) if m]
    causes = [m for m in found if "Caused by" in m.group(0)] or found
    if causes:
        name, message = causes[-1].group(1), (causes[-1].group(2) or "").strip()
        line = f"Spark failed: {name.rsplit('.', 1)[1]}" + (f": {message[:300]}" if message else "")
    else:
        first = next((l.strip() for l in text.splitlines() if l.strip()), type(exc).__name__)
        line = f"Spark failed: {first[:300]}"
    for pattern, hint in _HINTS:
        if pattern.search(text):
            line += f" ({hint})"
            break
    return line, 2


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)
