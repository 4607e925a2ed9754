"""A vectorised, seeded genetic algorithm for query placement (Ghosh et al. [1]_
section 4.2).

A chromosome is the mapping ``mu``: one gene per query, a resource index from the query's
constraint-1 domain. A whole population is scored at once with numpy: per-resource sums by
``bincount`` (constraints 2 and 3 and the interference ``pi(m)``), the critical path level by
level over the topological sets. Invalid chromosomes are penalised (a constant plus the amount
of violation), the best valid chromosome seen is kept, and the run stops after ``generations``
or when the best has not improved in the last half of them (section 4.2). Operators: binary
tournament selection, uniform crossover, per-gene mutation within the domain, elitism.

GA-Incremental places one arriving dataflow on the capacity left by the deployed ones;
GA-Global places every active dataflow ab initio on empty resources. GA-Global scores the sum
of the dataflows' makespans (the objective of 3.4); the paper joins them into one DAG with a
dummy source and sink, whose makespan would be the largest of them instead.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.edge.deployment import Deployment
from streamsched.edge.model import EDGE, Dataflow, EdgeSystem

#: Fitness added to a chromosome that breaks a constraint (seconds; makespans are far below).
PENALTY = 1.0e6


@dataclass(frozen=True)
class GASettings:
    population: int = 64
    generations: int = 100
    crossover: float = 0.9
    mutation: float = 0.0  # per gene; 0 = 1 / number of genes
    elite: int = 2


class PlacementProblem:
    """Several dataflows concatenated into one gene vector, with everything the fitness needs."""

    def __init__(self, system: EdgeSystem, dataflows: list[Dataflow], base: Deployment | None = None):
        self.system = system
        self.dataflows = dataflows
        sizes = [d.n for d in dataflows]
        offsets = np.cumsum([0] + sizes)
        self.n = int(offsets[-1])
        cat = lambda parts, dtype=float: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
        self.latency = np.concatenate([d.latency for d in dataflows]) if dataflows else np.zeros((0, 2))
        self.omega = cat([d.omega_in for d in dataflows])
        self.energy = cat([d.energy for d in dataflows])
        self.event_bytes = cat([d.event_bytes for d in dataflows])
        sources_free = system.sources_free
        self.counted = cat([~d.is_source if sources_free else np.ones(d.n, bool) for d in dataflows], bool)
        depth = cat([d.depth for d in dataflows], np.int64)
        self.levels = [np.flatnonzero(depth == k) for k in range(int(depth.max(initial=-1)) + 1)]
        width = max((len(ps) for d in dataflows for ps in d.parents), default=0)
        self.parents = np.full((self.n, max(width, 1)), self.n, dtype=np.int64)  # n = padding
        for d, off in zip(dataflows, offsets):
            for v, ps in enumerate(d.parents):
                self.parents[off + v, :len(ps)] = np.asarray(ps, dtype=np.int64) + off
        sinks = cat([np.flatnonzero(d.is_sink) + off for d, off in zip(dataflows, offsets)], np.int64)
        self.sinks = sinks
        self.sink_starts = np.searchsorted(sinks, offsets[:-1])
        domains = [a for d in dataflows for a in system.allowed(d)]
        keys = {id(a): a for a in domains}
        self.domains = list(keys.values())
        index = {k: i for i, k in enumerate(keys)}
        self.domain_of = np.array([index[id(a)] for a in domains], dtype=np.int64)
        r = system.n
        if base is None:
            self.base_count, self.base_latency = np.zeros(r), np.zeros(r)
            self.base_rate, self.base_energy = np.zeros(r), np.zeros(r)
        else:
            self.base_count, self.base_latency = base.count.astype(float), base.latency_sum.copy()
            self.base_rate, self.base_energy = base.max_rate.copy(), base.energy_rate.copy()
        self.offsets = offsets

    def random_genes(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        genes = np.empty((rows, self.n), dtype=np.int64)
        for k, domain in enumerate(self.domains):
            cols = np.flatnonzero(self.domain_of == k)
            genes[:, cols] = domain[rng.integers(domain.size, size=(rows, cols.size))]
        return genes

    def evaluate(self, genes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(sum of makespans, amount of constraint violation)`` per chromosome."""
        system = self.system
        p, n, r = genes.shape[0], self.n, system.n
        flat = genes + (np.arange(p) * r)[:, None]
        count = self.base_count + np.bincount(flat.ravel(), minlength=p * r).reshape(p, r)
        lam = self.latency[np.arange(n), system.latency_class[genes]] * system.speed[genes]
        counted_flat = flat[:, self.counted].ravel()
        latency_sum = self.base_latency + np.bincount(
            counted_flat, weights=lam[:, self.counted].ravel(), minlength=p * r).reshape(p, r)
        max_rate = np.tile(self.base_rate, p)
        np.maximum.at(max_rate, counted_flat, np.tile(self.omega[self.counted], p))
        max_rate = max_rate.reshape(p, r)
        on_edge = system.kind[genes] == EDGE
        draw = np.where(on_edge, self.omega * self.energy, 0.0)[:, self.counted].ravel()
        energy_rate = self.base_energy + np.bincount(counted_flat, weights=draw, minlength=p * r).reshape(p, r)
        pi = system.interference * np.maximum(count - 1.0, 0.0)
        rate_excess = np.maximum(max_rate * latency_sum * (1.0 + pi) - 1.0, 0.0).sum(axis=1)
        energy = system.base_energy_mah + system.recharge_s * energy_rate
        with np.errstate(invalid="ignore", divide="ignore"):
            battery_excess = np.where(system.kind == EDGE, np.maximum(energy / system.battery_mah - 1.0, 0.0), 0.0)
        violation = rate_excess + np.nan_to_num(battery_excess, nan=0.0).sum(axis=1)
        violation = np.where(violation > 1e-9, violation, 0.0)
        eff = lam * (1.0 + np.take_along_axis(pi, genes, axis=1))
        return self._makespans(genes, eff), violation

    def _makespans(self, genes: np.ndarray, eff: np.ndarray) -> np.ndarray:
        system = self.system
        p = genes.shape[0]
        head = np.full((p, self.n + 1), -np.inf)
        padded = np.concatenate([genes, genes[:, :1]], axis=1)
        event_bytes = np.append(self.event_bytes, 0.0)
        for k, level in enumerate(self.levels):
            if k == 0:
                head[:, level] = eff[:, level]
                continue
            parents = self.parents[level]  # (len, width)
            a = padded[:, parents]  # (p, len, width)
            b = genes[:, level][:, :, None]
            cost = system.net_latency[a, b] + event_bytes[parents] / system.net_bandwidth[a, b]
            head[:, level] = (head[:, parents] + cost).max(axis=2) + eff[:, level]
        if not self.dataflows:
            return np.zeros(p)
        return np.maximum.reduceat(head[:, self.sinks], self.sink_starts, axis=1).sum(axis=1)


def run_ga(problem: PlacementProblem, settings: GASettings, seed: int,
           initial: np.ndarray | None = None) -> tuple[np.ndarray, float, int]:
    """Best valid chromosome, its fitness and the generations run; ``InfeasibleError`` if none.

    ``initial`` (a chromosome) replaces one random member of the first population (a warm start).
    """
    rng = np.random.default_rng(seed)
    size = max(settings.population, settings.elite + 2)
    mutation = settings.mutation or 1.0 / max(problem.n, 1)
    population = problem.random_genes(rng, size)
    if initial is not None:
        population[0] = initial
    best, best_fit, last_improved = None, np.inf, 0

    def score(genes):
        objective, violation = problem.evaluate(genes)
        return np.where(violation > 0, PENALTY * (1.0 + violation) + objective, objective), violation

    fitness, violation = score(population)
    generation = 0
    for generation in range(1, settings.generations + 1):
        valid = np.flatnonzero(violation == 0)
        if valid.size and fitness[valid].min() < best_fit:
            k = int(valid[np.argmin(fitness[valid])])
            best, best_fit, last_improved = population[k].copy(), float(fitness[k]), generation
        if generation - last_improved >= settings.generations / 2:
            break
        order = np.argsort(fitness, kind="stable")
        duel = rng.integers(size, size=(2, size, 2))
        pick = np.where(fitness[duel[..., 0]] <= fitness[duel[..., 1]], duel[..., 0], duel[..., 1])
        mothers, fathers = population[pick[0]], population[pick[1]]
        cross = (rng.random((size, problem.n)) < 0.5) & (rng.random(size) < settings.crossover)[:, None]
        children = np.where(cross, fathers, mothers)
        mutate = rng.random((size, problem.n)) < mutation
        children = np.where(mutate, problem.random_genes(rng, size), children)
        children[: settings.elite] = population[order[: settings.elite]]
        population = children
        fitness, violation = score(population)
    valid = np.flatnonzero(violation == 0)
    if valid.size and fitness[valid].min() < best_fit:
        k = int(valid[np.argmin(fitness[valid])])
        best, best_fit = population[k].copy(), float(fitness[k])
    if best is None:
        names = ", ".join(d.name for d in problem.dataflows[:3])
        raise InfeasibleError(f"GA: no valid placement found for {names} in {generation} generations "
                              f"(population {size})")
    return best, best_fit, generation


def place_ga_incremental(deployment: Deployment, dag_id: int, dataflow: Dataflow,
                         settings: GASettings, seed: int, initial: np.ndarray | None = None) -> np.ndarray:
    """GA-Incremental: place one arriving dataflow on the capacity the others leave."""
    problem = PlacementProblem(deployment.system, [dataflow], base=deployment)
    genes, _, _ = run_ga(problem, settings, seed, initial)
    deployment.deploy(dag_id, dataflow, genes)
    return genes


def place_ga_global(system: EdgeSystem, dataflows: dict[int, Dataflow], settings: GASettings,
                    seed: int) -> Deployment:
    """GA-Global: place every active dataflow ab initio; returns a new deployment."""
    ids = list(dataflows)
    problem = PlacementProblem(system, [dataflows[d] for d in ids])
    genes, _, _ = run_ga(problem, settings, seed)
    deployment = Deployment(system)
    for dag_id, start, stop in zip(ids, problem.offsets[:-1], problem.offsets[1:]):
        deployment.deploy(dag_id, dataflows[dag_id], genes[start:stop], check=False)
    problems = deployment.violations()
    if problems:
        raise InfeasibleError(f"GA-Global: {problems[0]}")
    return deployment
