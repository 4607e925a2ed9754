"""Limits of the schedulers' searches: deterministic work by default, wall clock on request.

A search that stops on the wall clock gives another placement on a busy machine (issue 27:
i-scheduler missed the best cost on 13 of 72 micro-benchmarks at load average 10), so every
search stops on a work limit (CP-SAT deterministic seconds, iterations); a wall-clock limit is
a parameter the user sets.
"""

#: The wall-clock limit handed to the exact solver when the user sets none: its own clock
#: checks then never stop it (the work limit does).
NO_WALL_LIMIT_S = 365 * 86400.0
#: Largest work or wall-clock budget a parameter takes, seconds; above it, refused.
WORK_LIMIT_MAX = 1e6
