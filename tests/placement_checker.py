"""An independent judge of placements, written for the tests: plain Python over the raw arrays,
sharing no code with :meth:`Placement.violations` or :mod:`streamsched.metrics`.

A placement is valid when it names every task exactly once (one node index per task), each node
index exists, each worker index is a slot of that task's node (or -1, none chosen), and the
loads summed per node stay within that node's own capacity (relative slack 1e-9 for float sums),
and the co-location rule holds: per node at most ``max_per_node`` tasks of an operator (when
the graph gives one, non-zero) and, when the node has ``task_slots``, the slots needed (per slot
sharing group the largest number of tasks of one of its operators, summed over the groups)
within them.
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
    return found + colocation_problems(graph, cluster, placement)


def colocation_problems(graph, cluster, placement) -> list[str]:
    """The co-location rule alone, counted task by task."""
    operators = [int(v) for v in graph.task_operator]
    caps = list(graph.max_per_node) or [0] * len(graph.operator_names)
    groups = list(graph.slot_group) or ["one group"] * len(graph.operator_names)
    found = []
    for k, node in enumerate(cluster.nodes):
        count: dict[int, int] = {}
        for task, where in enumerate(placement.node_of):
            if int(where) == k:
                count[operators[task]] = count.get(operators[task], 0) + 1
        for v, n in count.items():
            if caps[v] and n > caps[v]:
                found.append(f"{node.name}: {n} tasks of operator {v} > max_per_node {caps[v]}")
        slots_needed: dict[str, int] = {}
        for v, n in count.items():
            slots_needed[groups[v]] = max(slots_needed.get(groups[v], 0), n)
        if node.task_slots and sum(slots_needed.values()) > node.task_slots:
            found.append(f"{node.name}: needs {sum(slots_needed.values())} task slots > {node.task_slots}")
    return found


def cut_traffic(graph, placement) -> float:
    """Sum of the rates of the edges whose two tasks are on different nodes."""
    node_of = [int(k) for k in placement.node_of]
    return sum(float(rate) for s, d, rate in zip(graph.src.tolist(), graph.dst.tolist(), graph.rate.tolist())
               if node_of[s] != node_of[d])
