"""The failure contract shared by every layer.

``InputError`` is bad input (exit code 2): the message names the file, line or field.
``InfeasibleError`` is an expected outcome (exit code 3): the tasks cannot be placed.
"""


class StreamschedError(Exception):
    """Base class of every error streamsched raises on purpose."""

    exit_code = 1


class InputError(StreamschedError, ValueError):
    """Bad input: a file, field, parameter or name that cannot be used."""

    exit_code = 2


class ParameterError(InputError):
    """A scheduler parameter outside its declared domain; the message names the parameter."""


class InfeasibleError(StreamschedError):
    """The tasks cannot be placed on the cluster under its constraints."""

    exit_code = 3


class OutputSchemaError(StreamschedError):
    """A document streamsched was about to write does not validate against its own schema: a bug
    in streamsched, not in the input; nothing is written (exit code 70, ``EX_SOFTWARE``)."""

    exit_code = 70
