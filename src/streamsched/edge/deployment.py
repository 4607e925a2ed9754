"""The mapping set ``M_t`` of the active dataflows on an :class:`EdgeSystem`, with the
per-resource sums that constraints 2 and 3 of Ghosh et al. [1]_ section 3.3 need.

Constraint 2 (rate): every counted query ``i`` on resource ``p`` satisfies
``omega_in_i <= 1 / (sum_j lambda_j^p (1 + pi(m)))``; the binding query is the one with the
largest input rate, so the check is ``max_i omega_in_i x sum_j lambda_j^p x (1 + pi(m)) <= 1``.
Constraint 3 (battery, edge only): ``tau_p kappa_p + tau_p sum_i omega_in_i epsilon_i <= C_p``;
the printed equation leaves the recharge interval out of the second term and mixes mA with
mAh, we write both terms in mAh over ``tau_p``. ``m`` counts every query on the resource; the
sums skip source queries when ``system.sources_free`` (the paper's rule).

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.edge.model import EDGE, TOLERANCE, Dataflow, EdgeSystem, critical_path

UNPLACED = -1


class Deployment:
    """Mutable placement state: which query of which dataflow runs where."""

    def __init__(self, system: EdgeSystem):
        self.system = system
        r = system.n
        self.count = np.zeros(r, dtype=np.int64)
        self.latency_sum = np.zeros(r)
        self.max_rate = np.zeros(r)
        self.energy_rate = np.zeros(r)
        self.residents: list[dict[tuple[int, int], None]] = [dict() for _ in range(r)]
        self.dataflows: dict[int, Dataflow] = {}
        self.mapping: dict[int, np.ndarray] = {}
        self._timing: dict[int, tuple] = {}  # dag -> (L_G, path, L, T or None, edge costs)

    # ------------------------------------------------------------------ bookkeeping
    def counted(self, dataflow: Dataflow, v: int) -> bool:
        return not (self.system.sources_free and dataflow.is_source[v])

    def _touch(self, r: int) -> None:
        for dag_id, _ in self.residents[r]:
            self._timing.pop(dag_id, None)

    def _recompute_max_rate(self, r: int) -> None:
        rates = [self.dataflows[d].omega_in[v] for d, v in self.residents[r] if self.counted(self.dataflows[d], v)]
        self.max_rate[r] = max(rates, default=0.0)

    def add_dataflow(self, dag_id: int, dataflow: Dataflow) -> None:
        """Register an (as yet unplaced) dataflow."""
        self.dataflows[dag_id] = dataflow
        self.mapping[dag_id] = np.full(dataflow.n, UNPLACED, dtype=np.int64)

    def add_query(self, dag_id: int, v: int, r: int) -> None:
        dataflow = self.dataflows[dag_id]
        self._touch(r)
        self.mapping[dag_id][v] = r
        self.residents[r][(dag_id, v)] = None
        self.count[r] += 1
        if self.counted(dataflow, v):
            omega = dataflow.omega_in[v]
            self.latency_sum[r] += self.system.exclusive_latency(dataflow, v, r)
            self.max_rate[r] = max(self.max_rate[r], omega)
            if self.system.kind[r] == EDGE:
                self.energy_rate[r] += omega * dataflow.energy[v]
        self._timing.pop(dag_id, None)

    def remove_query(self, dag_id: int, v: int) -> int:
        """Take query ``v`` off its resource; returns that resource."""
        dataflow = self.dataflows[dag_id]
        r = int(self.mapping[dag_id][v])
        self._touch(r)
        del self.residents[r][(dag_id, v)]
        self.mapping[dag_id][v] = UNPLACED
        self.count[r] -= 1
        if self.counted(dataflow, v):
            self.latency_sum[r] -= self.system.exclusive_latency(dataflow, v, r)
            if self.system.kind[r] == EDGE:
                self.energy_rate[r] -= dataflow.omega_in[v] * dataflow.energy[v]
            self._recompute_max_rate(r)
        if not self.residents[r]:
            self.latency_sum[r] = self.energy_rate[r] = 0.0
        self._timing.pop(dag_id, None)
        return r

    def deploy(self, dag_id: int, dataflow: Dataflow, mapping, check: bool = True) -> None:
        """Place a whole dataflow at once (GA results); with ``check``, raise ``InfeasibleError``
        (and undo) if the mapping set then breaks a constraint."""
        self.add_dataflow(dag_id, dataflow)
        for v, r in enumerate(np.asarray(mapping).tolist()):
            self.add_query(dag_id, v, int(r))
        problems = self.violations() if check else []
        if problems:
            self.undeploy(dag_id)
            raise InfeasibleError(f"dataflow {dataflow.name!r}: {problems[0]}")

    def undeploy(self, dag_id: int) -> None:
        """Stop a departing dataflow and reclaim its resources."""
        for v in np.flatnonzero(self.mapping[dag_id] != UNPLACED).tolist():
            self.remove_query(dag_id, v)
        del self.dataflows[dag_id], self.mapping[dag_id]
        self._timing.pop(dag_id, None)

    def move(self, dag_id: int, v: int, r: int) -> None:
        self.remove_query(dag_id, v)
        self.add_query(dag_id, v, r)

    # ------------------------------------------------------------------ constraints
    def valid_resources(self, dag_id: int, v: int, candidates: np.ndarray) -> np.ndarray:
        """Mask over ``candidates``: may unplaced query ``v`` go there (constraints 2 and 3, for it
        and for the queries already there)? Constraint 1 is the caller's candidate set."""
        system = self.system
        dataflow = self.dataflows[dag_id]
        counted = self.counted(dataflow, v)
        omega = dataflow.omega_in[v] if counted else 0.0
        lam = system.exclusive_latency(dataflow, v, candidates) if counted else 0.0
        slowdown = 1.0 + system.pi(self.count[candidates] + 1, candidates)
        rate = np.maximum(self.max_rate[candidates], omega)
        ok = rate * (self.latency_sum[candidates] + lam) * slowdown <= 1.0 + TOLERANCE
        if counted:
            energy = system.base_energy_mah[candidates] + system.recharge_s[candidates] * (
                self.energy_rate[candidates] + omega * dataflow.energy[v])
            battery = system.battery_mah[candidates]
            ok &= (system.kind[candidates] != EDGE) | (energy <= battery * (1 + TOLERANCE))
        return ok

    def violations(self) -> list[str]:
        """Every broken constraint of the current mapping set (empty when valid)."""
        system = self.system
        problems = []
        for dag_id, dataflow in self.dataflows.items():
            mapping = self.mapping[dag_id]
            allowed = system.allowed(dataflow)
            for v in range(dataflow.n):
                if mapping[v] == UNPLACED:
                    problems.append(f"dataflow {dataflow.name!r} query {v} is not placed")
                elif mapping[v] not in allowed[v]:
                    where = "edge" if dataflow.is_source[v] else "cloud"
                    problems.append(f"constraint 1: dataflow {dataflow.name!r} query {v} must run on {where}")
        load = self.max_rate * self.latency_sum * (1.0 + system.pi(self.count))
        for r in np.flatnonzero(load > 1.0 + TOLERANCE)[:5].tolist():
            problems.append(f"constraint 2: resource {r} serves input rate {self.max_rate[r]:g} e/s "
                            f"but supports {1.0 / (load[r] / self.max_rate[r]):g} e/s")
        energy = system.base_energy_mah + system.recharge_s * self.energy_rate
        drained = (system.kind == EDGE) & (energy > system.battery_mah * (1 + TOLERANCE))
        for r in np.flatnonzero(drained)[:5].tolist():
            problems.append(f"constraint 3: edge {r} needs {energy[r]:.1f} mAh per recharge interval "
                            f"but its battery holds {system.battery_mah[r]:.1f} mAh")
        return problems

    # ------------------------------------------------------------------ latencies
    def effective_latency(self, dag_id: int) -> np.ndarray:
        """``lambda_i^p (1 + pi(m_p))`` of every query of a placed dataflow."""
        dataflow = self.dataflows[dag_id]
        mapping = self.mapping[dag_id]
        lam = dataflow.latency[np.arange(dataflow.n), self.system.latency_class[mapping]] * self.system.speed[mapping]
        return lam * (1.0 + self.system.pi(self.count[mapping], mapping))

    def timing(self, dag_id: int):
        """``(L_G, critical path, L, T, edge costs)`` of a placed dataflow (cached until one of
        its resources changes)."""
        cached = self._timing.get(dag_id)
        if cached is None:
            dataflow = self.dataflows[dag_id]
            cost = self.system.edge_cost(dataflow, self.mapping[dag_id])
            length, path, head, tail = critical_path(dataflow, self.effective_latency(dag_id), cost)
            cached = self._timing[dag_id] = (length, path, head, tail, cost)
        return cached

    def makespan(self, dag_id: int) -> float:
        return self.timing(dag_id)[0]

    def trial_move(self, dag_id: int, v: int, r: int) -> tuple[float, dict[int, tuple]] | None:
        """Migrate query ``v`` to ``r`` if constraints 2 and 3 allow it and return
        ``(change, saved timings)``, else None (nothing changed); undo with :meth:`undo_move`.

        ``change`` is the moved dataflow's change of makespan plus the slow-down of the
        dataflows sharing ``r`` (one more query there); the relief of those on the resource
        left behind is not counted, so a negative change is a real decrease of the objective
        (an upper bound of it). When the moved dataflow itself does not gain, the others are
        not evaluated and its own change is returned.
        """
        old = int(self.mapping[dag_id][v])
        saved = {d: self._timing[d] for d in self.dataflows_on(old, r) | {dag_id} if d in self._timing}
        own_before = self.makespan(dag_id)
        target_before = {d: self.makespan(d) for d in self.dataflows_on(r) if d != dag_id}
        saved.update((d, self._timing[d]) for d in target_before | {dag_id: 0.0})
        self.remove_query(dag_id, v)
        if not self.valid_resources(dag_id, v, np.array([r]))[0]:
            self.add_query(dag_id, v, old)
            self._timing.update(saved)
            return None
        self.add_query(dag_id, v, r)
        change = self.makespan(dag_id) - own_before
        if change >= 0.0:
            return change, saved
        return change + sum(self.makespan(d) - before for d, before in target_before.items()), saved

    def undo_move(self, dag_id: int, v: int, old: int, before: dict[int, tuple]) -> None:
        """Put ``v`` back on ``old`` after :meth:`trial_move`, restoring the cached timings."""
        self.move(dag_id, v, old)
        self._timing.update(before)

    def total_makespan(self) -> float:
        """The objective of 3.4: the sum of the active dataflows' makespans."""
        return float(sum(self.makespan(d) for d in self.dataflows))

    def dataflows_on(self, *resources: int) -> set[int]:
        return {d for r in resources for d, _ in self.residents[r]}

    def snapshot(self) -> dict[int, np.ndarray]:
        return {d: m.copy() for d, m in self.mapping.items()}
