"""Adaptive placement of CEP dataflows that arrive and depart on edge and cloud resources
(Ghosh et al. [1]_): model, TopSet/TopSet-P, GA-Incremental/GA-Global, rebalancing,
workloads and the control-interval simulation.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""
