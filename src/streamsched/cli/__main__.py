"""``python -m streamsched.cli``: the ``streamsched`` command."""

from streamsched.cli import run

run()
