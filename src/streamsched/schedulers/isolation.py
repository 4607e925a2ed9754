"""Storm's IsolationScheduler (thesis-top-a3-ban-gr-storm.txt section 4.2; prior-art.md).

``isolation.scheduler.machines`` maps topology names to machine counts: an isolated topology
gets that many whole machines that no other topology uses (before or after it), chosen among
the unoccupied ones with the most capacity, then the most slots; its executors go round robin
over those machines' slots (Storm's even scheduling, capacity-aware). Every other topology is
scheduled evenly on the machines no isolated topology holds. Run several topologies through
:func:`streamsched.schedulers.base.schedule_many` (``streamsched schedule -w a -w b``), the
isolated ones first as Storm does.
"""

from __future__ import annotations

import numpy as np

from streamsched.errors import InfeasibleError, ParameterError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.schedulers import register
from streamsched.schedulers.base import Param, Scheduler
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
    params = (
        Param("machines", str, "", "dedicated machines per topology, e.g. 'wordcount=2,exclamation=1'"),
    )

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
        placement = self._even(graph, cluster, chosen, seed)
        return placement.with_metadata(dedicated_nodes=chosen)

    @staticmethod
    def _even(graph, cluster: Cluster, nodes: list[int], seed: int) -> Placement:
        """Storm's even scheduling restricted to ``nodes``."""
        if not nodes:
            raise InfeasibleError(f"isolation: no machine of {cluster.name!r} is left for {graph.name!r}")
        sub = Cluster(name=cluster.name, nodes=tuple(cluster.nodes[k] for k in nodes))
        inner = EvenScheduler().place(graph, sub, {"workers": 0}, seed)
        index = np.asarray(nodes)
        return Placement.build(index[inner.node_of], inner.worker_of)
