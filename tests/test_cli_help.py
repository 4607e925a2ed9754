"""``--help`` of every command reads as plain text (issue 24, item 4): no reST literals or
roles, no typer type names (``<bool>`` on a flag), paragraphs wrapped by the terminal, not at
the source's line breaks; every number option says its unit or kind and its default;
``list schedulers`` writes parameters as one types them."""

import re

import pytest
import typer

from streamsched.cli import load_commands, main
from streamsched.cli.app import app
from streamsched.cli.help import plain, tidy


def command_paths():
    load_commands(None)
    root = tidy(typer.main.get_command(app))

    def walk(command, path):
        yield path, command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    return list(walk(root, []))


PATHS = command_paths()
RAW = re.compile(r"``|:(func|class|mod|meth|data|attr):`|<(bool|str|int|float|path|list\[[^\]]*\]|int range|"
                 r"float range|Path)>")


def test_every_command_is_walked():
    names = {" ".join(p) for p, _ in PATHS}
    assert {"", "compare", "schedule", "collect flink", "read-engine storm-ui", "edge simulate"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("path", [p for p, _ in PATHS], ids=lambda p: " ".join(p) or "streamsched")
def test_help_is_plain_text(path, capsys):
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: streamsched" in out
    assert not RAW.search(out), RAW.search(out).group(0)
    # the description wraps where the terminal needs it: a line is only followed by another of
    # the same paragraph when the next word would not have fitted on it
    width = max(len(line) for line in out.splitlines())
    head = out[out.index("Usage:"):out.index("╭")].splitlines()[1:]
    for line, after in zip(head, head[1:]):
        if line.strip() and after.strip() and not after.strip().startswith("- "):
            assert len(line.rstrip()) + 1 + len(after.split()[0]) > width - 1, (line, after)


def test_numbers_say_their_unit_or_kind_and_default():
    checked = 0
    for path, command in PATHS:
        for param in command.params:
            if param.param_type_name != "option" or param.is_flag:
                continue
            assert param.metavar and "<" not in param.metavar, (path, param.opts)
            if param.type_descriptor.annotation in (int, float) or "Optional[int]" in str(
                    param.type_descriptor.annotation) or "Optional[float]" in str(param.type_descriptor.annotation):
                checked += 1
                help_text = (param.help or "").lower()
                assert param.default is not None or "default" in help_text or param.required, (path, param.opts)
                assert param.metavar in ("N", "NUMBER", "SECONDS", "SHARE", "FACTOR", "PERCENT", "CORES", "ROWS",
                                         "TASKS", "BYTES"), (path, param.opts)
                if param.metavar == "SECONDS":  # the unit is the help's, not a guess
                    assert re.search(r"\bs\b|seconds", help_text), (path, param.opts)
    assert checked >= 30


def test_help_of_a_collector_shows_units_and_defaults(capsys):
    assert main(["collect", "flink", "--help"]) == 0
    out = " ".join(re.sub("[│╭╰╮╯─]", " ", capsys.readouterr().out).split())
    assert "--interval SECONDS seconds between readings [default: 60.0]" in out
    assert "--timeout SECONDS stop after this many seconds (default: run until stopped)" in out
    assert re.search(r"--once +one reading", out)  # a flag takes nothing


def test_plain_joins_wrapped_lines_keeps_items_and_drops_rest_markup():
    text = """Run ``compare`` on
    :func:`streamsched.comparison.rank` rows.

    - first item
      continued
    - second"""
    assert plain(text) == "Run `compare` on `rank` rows.\n\n- first item continued\n- second"


def test_list_schedulers_writes_parameters_as_typed(capsys):
    assert main(["list", "schedulers", "--json"]) == 0
    out = capsys.readouterr().out
    assert "int in [" not in out and "None]" not in out and "(bool)" not in out
    assert "workers=0 (integer >= 0)" in out and "strict=false (true or false)" in out
    assert "alpha=0.8 (number from 0 to 1)" in out and "topology_type=cpu (cpu, memory, network or io)" in out
