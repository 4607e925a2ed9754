"""An independent judge of placements, written for the tests: plain Python over the raw arrays,
sharing no code with :meth:`Placement.violations` or :mod:`streamsched.metrics`.

A placement is valid when it names every task exactly once (one node index per task), each node
index exists, each worker index is a slot of that task's node (or -1, none chosen), and the
loads summed per node stay within that node's own capacity (relative slack 1e-9 for float sums).
"""

from __future__ import annotations

NO_WORKER = -1
SLACK = 1e-9


def problems(graph, cluster, placement) -> list[str]:
    """Every rule the placement breaks, in words (empty when valid)."""
    nodes = list(cluster.nodes)
    node_of = [int(k) for k in placement.node_of]
    worker_of = [int(w) for w in placement.worker_of]
    loads = [float(x) for x in graph.load]
    if len(node_of) != len(loads) or len(worker_of) != len(loads):
        return [f"{len(node_of)} node entries and {len(worker_of)} worker entries for {len(loads)} tasks"]
    found = []
    held = [0.0] * len(nodes)
    for task, (node, worker) in enumerate(zip(node_of, worker_of)):
        if not 0 <= node < len(nodes):
            found.append(f"task {task} on node index {node} of {len(nodes)}")
            continue
        if worker != NO_WORKER and not 0 <= worker < nodes[node].slots:
            found.append(f"task {task} on worker {worker} of {nodes[node].name} ({nodes[node].slots} slots)")
        held[node] += loads[task]
    for node, total in zip(nodes, held):
        if total > node.capacity * (1 + SLACK) + SLACK:
            found.append(f"{node.name} holds {total} > its capacity {node.capacity}")
    return found


def cut_traffic(graph, placement) -> float:
    """Sum of the rates of the edges whose two tasks are on different nodes."""
    node_of = [int(k) for k in placement.node_of]
    return sum(float(rate) for s, d, rate in zip(graph.src.tolist(), graph.dst.tolist(), graph.rate.tolist())
               if node_of[s] != node_of[d])
