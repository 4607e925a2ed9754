"""Reading YAML/JSON documents (topologies, clusters, placements): bounded, one-line errors
(issue 16: a 1.6 kB alias bomb took 1.27 GB, a named pipe blocked forever, a deeply nested
file raised RecursionError, ``source_rate: .inf`` was taken)."""

from __future__ import annotations

import os

import pytest

from streamsched.errors import InputError
from streamsched.model.io import read_document
from streamsched.model import Cluster, Topology


def test_yaml_aliases_are_refused_with_the_line(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [f"{chr(98 + k)}: &{chr(98 + k)} [*{chr(97 + k)}, *{chr(97 + k)}]"
                                                   for k in range(8)]
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"bomb.yaml:2: invalid YAML \(alias \*a refused"):
        read_document(bomb)


def test_a_named_pipe_is_refused_not_read(tmp_path):
    fifo = tmp_path / "cluster.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="cluster.yaml: not a regular file"):
        read_document(fifo)  # opening it would block until a writer came


def test_deep_nesting_is_one_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="deep.json: nested too deeply"):
        read_document(deep)
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("[" * 5_000 + "]" * 5_000)
    with pytest.raises(InputError, match="deep.yaml"):
        read_document(deep_yaml)


@pytest.mark.parametrize("text", [".inf", "-.inf", ".nan"])
def test_numbers_must_be_finite(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\nnodes:\n  - {{name: a, capacity: {text}}}\n")
    with pytest.raises(InputError, match="capacity: must be a finite number"):
        Cluster.load(path)
    with pytest.raises(InputError, match=r"f.operators\[0\].source_rate: must be a finite number, got nan"):
        Topology.from_dict({"operators": [{"name": "a", "source_rate": float("nan")}]}, "f")
