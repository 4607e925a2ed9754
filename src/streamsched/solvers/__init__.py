"""Exact task placement: one model (Eskandari et al. [1]_ section 3, eqs. 1-5), several MILP
back-ends.

:func:`solve_placement` takes plain arrays (items with loads, directed weighted edges, node
capacities), so it serves the ``optimal`` scheduler on task graphs and I-Scheduler on reduced
graphs of fused tasks alike. Back-ends: ``cp-sat`` (OR-Tools, default), ``highs``, ``cplex``
(Community Edition size limits are reported as :class:`SolverLimitError`).

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
"""

from streamsched.solvers.backend import SolverLimitError
from streamsched.solvers.placement import (BACKENDS, DEFAULT_MEMORY_LIMIT_MB, FORMULATIONS, STATUSES, SolveResult,
                                           UnsoundBoundError, solve_placement)

__all__ = ["BACKENDS", "DEFAULT_MEMORY_LIMIT_MB", "FORMULATIONS", "STATUSES", "SolveResult", "SolverLimitError",
           "UnsoundBoundError", "solve_placement"]
