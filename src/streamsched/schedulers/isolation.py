"""Storm's [1]_ IsolationScheduler (Muhammad [2]_ section 4.2).

``isolation.scheduler.machines`` maps topology names to machine counts: an isolated topology
gets that many whole machines that no other topology uses (before or after it), chosen among
the unoccupied ones with the most capacity, then the most slots; its executors go round robin
over those machines' slots (Storm's even scheduling, capacity-aware). Every other topology is
scheduled evenly on the machines no isolated topology holds. Run several topologies through
:func:`streamsched.schedulers.base.schedule_many` (``streamsched schedule -w a -w b``), the
isolated ones first as Storm does.

References
----------
.. [1] Toshniwal, A.; Taneja, S.; Shukla, A.; Ramasamy, K.; Patel, J. M.; Kulkarni, S.; Jackson, J.;
   Gade, K.; Fu, M.; Donham, J.; Bhagat, N.; Mittal, S.; Ryaboy, D. (2014) "Storm @Twitter",
   Proceedings of the 2014 ACM SIGMOD International Conference on Management of Data, pp. 147-156.
.. [2] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Department of Computer Science, Capital University of
   Science and Technology, Islamabad.
"""

from __future__ import annotations

import numpy as np

from streamsched.errors import InfeasibleError, ParameterError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler
from streamsched.schedulers.even import EvenScheduler


def parse_machines(spec: str, owner: str = "isolation") -> dict[str, int]:
    """``"wordcount=2,exclamation=1"`` -> ``{"wordcount": 2, "exclamation": 1}``."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, count = item.rpartition("=")
        try:
            value = int(count)
        except ValueError:
            value = -1
        if not sep or not name.strip() or value < 1:
            raise ParameterError(f"{owner}.params.machines: {item!r} is not TOPOLOGY=COUNT with COUNT >= 1")
        out[name.strip()] = value
    return out


@register
class IsolationScheduler(Scheduler):
    name = "isolation"
    summary = "Storm's Isolation scheduler: listed topologies on dedicated machines, the rest even"
    objective = "balance"
    params = (
        Param("machines", str, "", "dedicated machines per topology, e.g. 'wordcount=2,exclamation=1'"),
        STRICT,
    )

    def skip_reason(self, graph, cluster):
        """Without machines dedicated to ``graph``, one topology gets Storm's even placement."""
        if graph.name not in parse_machines(self.resolved_params()["machines"], self.name):
            return f"no machines dedicated to {graph.name!r} (param machines={graph.name}=N): the placement would be even's"
        return super().skip_reason(graph, cluster)

    def place(self, graph, cluster, params, seed):
        wanted = parse_machines(params["machines"], self.name).get(graph.name)
        if wanted is None:
            return self._even(graph, cluster, [k for k in range(cluster.n_nodes) if cluster.slots[k] > 0], seed)
        occupied = getattr(cluster, "occupied", ()) or (False,) * cluster.n_nodes
        free = [k for k in range(cluster.n_nodes) if not occupied[k] and cluster.slots[k] > 0]
        free.sort(key=lambda k: (-cluster.capacity[k], -cluster.slots[k], k))
        if len(free) < wanted:
            raise InfeasibleError(
                f"isolation: {graph.name!r} needs {wanted} dedicated machines; {len(free)} are free of "
                f"other topologies in {cluster.name!r}"
            )
        chosen = sorted(free[:wanted])
        have = float(cluster.capacity[chosen].sum())
        if graph.total_load > have * (1 + 1e-9):
            raise InfeasibleError(
                f"isolation: {graph.name!r} needs load {graph.total_load:g}; its {wanted} dedicated machines "
                f"have capacity {have:g}"
            )
        try:
            placement = self._even(graph, cluster, chosen, seed)
        except PackingFailed as failure:  # repaired on the dedicated machines only
            failure.metadata["dedicated_nodes"] = chosen
            raise
        return placement.with_metadata(dedicated_nodes=chosen)

    @staticmethod
    def _even(graph, cluster: Cluster, nodes: list[int], seed: int) -> Placement:
        """Storm's even scheduling restricted to ``nodes``."""
        if not nodes:
            raise InfeasibleError(f"isolation: no machine of {cluster.name!r} is left for {graph.name!r}")
        sub = Cluster(name=cluster.name, nodes=tuple(cluster.nodes[k] for k in nodes))
        index = np.asarray(nodes)
        try:
            inner = EvenScheduler().place(graph, sub, {"workers": 0}, seed)
        except PackingFailed as failure:
            node_of = np.where(failure.node_of >= 0, index[np.maximum(failure.node_of, 0)], -1)
            raise PackingFailed(str(failure), node_of, failure.worker_of, nodes=index[failure.nodes],
                                metadata=failure.metadata) from None
        return Placement.build(index[inner.node_of], inner.worker_of)
