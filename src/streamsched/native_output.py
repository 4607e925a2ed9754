"""Keep native libraries' chatter (METIS, KaHIP, CP-SAT, CPLEX, HiGHS) off stdout and stderr.

C and C++ libraries write straight to file descriptors 1 and 2, past Python's ``sys.stdout``,
so ``compare --json`` would stop being JSON. :func:`captured_native_output` captures both
descriptors for the duration of a call with ``wurlitzer`` (which also flushes C's stdio
buffers); what was written goes to the ``streamsched.native`` logger at DEBUG level (shown with
``--verbose``).
"""

from __future__ import annotations

import io
import logging
import sys
from contextlib import contextmanager
from typing import Iterator

from wurlitzer import STDOUT, pipes

LOG = logging.getLogger("streamsched.native")


@contextmanager
def captured_native_output(library: str) -> Iterator[None]:
    """Capture descriptors 1 and 2 around the block; log what ``library`` wrote."""
    sys.stdout.flush()
    sys.stderr.flush()
    sink = io.StringIO()
    try:
        with pipes(stdout=sink, stderr=STDOUT, encoding="utf-8"):
            yield
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        text = sink.getvalue().strip()
        if text:
            LOG.debug("%s: %s", library, text)
