"""Keep native libraries' chatter (METIS, KaHIP, CP-SAT, CPLEX, HiGHS) off stdout and stderr.

C and C++ libraries write straight to file descriptors 1 and 2, past Python's ``sys.stdout``,
so ``compare --json`` would stop being JSON. :func:`captured_native_output` points both
descriptors at a temporary file for the duration of a call and keeps what was written; the
messages go to the ``streamsched.native`` logger at DEBUG level (shown with ``--verbose``).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from contextlib import contextmanager
from typing import Iterator

LOG = logging.getLogger("streamsched.native")


@contextmanager
def captured_native_output(library: str) -> Iterator[None]:
    """Redirect descriptors 1 and 2 around the block; log what ``library`` wrote."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            text = sink.read().decode("utf-8", errors="replace").strip()
            if text:
                LOG.debug("%s: %s", library, text)
