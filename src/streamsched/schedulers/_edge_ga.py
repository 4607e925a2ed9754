"""Parameters shared by the two GA schedulers (a ``_`` module: not itself a scheduler)."""

from streamsched.edge.ga import GASettings
from streamsched.schedulers.base import Param

GA_PARAMS = (
    Param("population", int, 64, "chromosomes per generation", low=4, high=10_000),
    Param("generations", int, 100, "at most; stops early after no improvement in the last half", low=1, high=100_000),
    Param("crossover", float, 0.9, "probability of uniform crossover", low=0.0, high=1.0),
    Param("mutation", float, 0.0, "per-gene mutation probability (0 = 1 / tasks)", low=0.0, high=1.0),
    Param("warm_start", bool, True, "put TopSet's placement in the first population"),
)


def settings(params) -> GASettings:
    return GASettings(population=params["population"], generations=params["generations"],
                      crossover=params["crossover"], mutation=params["mutation"])
