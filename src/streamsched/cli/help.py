"""``--help`` for people: the commands' docstrings are written for the API documentation (reST
literals, lines wrapped at the source's width); :func:`tidy` turns every command's and option's
help into plain text that the terminal wraps (paragraphs joined, list items kept on their own
line, ````x```` and ``:role:`x``` shown as `x`), and gives every option a metavar saying what
it takes instead of typer's type names (no ``<bool>`` on a flag, ``SECONDS`` rather than
``<float>`` where the help names the unit)."""

from __future__ import annotations

import inspect
import re

from types import SimpleNamespace
from typing import Any, get_args

#: reST inline markup: ``literal``, :role:`target` and :role:`text <target>`.
_LITERAL = re.compile(r"``(.+?)``")
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(?:[^`<]*<)?~?([^`>]+)>?`")
#: A line that starts a new item rather than continuing the sentence above it.
_ITEM = re.compile(r"^\s*(?:[-*] |\d+[.)] )")


def plain(text: str | None) -> str | None:
    """``text`` without reST markup, each paragraph (and list item) on one line; paragraphs
    stay apart by a blank line."""
    if not text:
        return text
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", inspect.cleandoc(text))
    text = _LITERAL.sub(r"`\1`", text)
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines: list[str] = []
        for line in block.splitlines():
            if lines and not _ITEM.match(line):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.strip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


#: What a number option's help says it is, tried in order: its metavar and the words that say so.
_UNITS = (("SHARE", r"^share\b|\bshare of\b"), ("FACTOR", r"\bmultiply\b"), ("PERCENT", r"%"),
          ("SECONDS", r"\bseconds\b|,\s*s\b|\(s\b|\bepoch s\b"), ("CORES", r"\bcores\b"),
          ("ROWS", r"\brows\b"), ("TASKS", r"\btasks\b"), ("BYTES", r"\bbytes\b"))


def metavar(option: Any) -> str:
    """What ``option`` (typer's option or argument) takes, in capitals: ``""`` for a flag; for a
    number what its help says it is (``SECONDS``, ``SHARE``, ``PERCENT``, ``ROWS``, ...), else
    ``N`` or ``NUMBER``; ``PATH``, ``K=V`` for a ``k=v`` option, the choices of a choice,
    ``TEXT``."""
    if getattr(option, "is_flag", False) or getattr(option, "count", False):
        return ""
    kind = option.type_descriptor
    annotation = kind.annotation
    if kind.is_list:
        (annotation,) = get_args(annotation)
    if kind.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in kind.choices)
    if kind.is_path:
        return "PATH"
    if "k=v" in (option.help or "").lower():
        return "K=V"
    if annotation in (int, float):
        unit = next((name for name, words in _UNITS if re.search(words, option.help or "")), None)
        return unit or ("N" if annotation is int else "NUMBER")
    return "TEXT"


def tidy(command: Any) -> Any:
    """Plain help text and metavars on ``command`` and every command under it (in place)."""
    command.help = plain(command.help)
    command.short_help = plain(command.short_help)
    for param in command.params:
        param.help = plain(param.help)
        if param.param_type_name == "option" and param.metavar is None:
            param.metavar = metavar(param)
        elif param.param_type_name == "argument":
            # typer shows an argument's Python type in the help (its metavar is its usage name)
            taken = metavar(param) + ("..." if param.nargs != 1 else "")
            param.display_type_rich = lambda ctx, taken=taken: taken
    # the --help option is made once per command and then kept: make it now and mark it a flag
    shown = command.get_help_option(SimpleNamespace(help_option_names=["--help"]))
    if shown is not None:
        shown.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)
    return command
