"""Limits of the schedulers' searches: deterministic work by default, wall clock on request.

A search that stops on the wall clock gives another placement on a busy machine (issue 27:
i-scheduler missed the best cost on 13 of 72 micro-benchmarks at load average 10), so every
search stops on a work limit (CP-SAT deterministic seconds, iterations); a wall-clock limit is
a parameter the user sets (:func:`streamsched.solvers.solve_placement` without ``time_limit``).
"""

#: Largest work or wall-clock budget a parameter takes, seconds; above it, refused.
WORK_LIMIT_MAX = 1e6
