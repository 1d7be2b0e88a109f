"""``expand``: a spec to its plan: one grid (``grid.expand_grid``) or, for a spec with
``blocks``, the concatenated plans of its blocks (``blocks.expand_blocks``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from scalelab.sweep.plan.blocks import expand_blocks
from scalelab.sweep.plan.datasets import DatasetFacts, dataset_facts
from scalelab.sweep.plan.grid import expand_grid
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.spec.load import Spec, load_spec

__all__ = ["expand", "load_plan"]


def load_plan(path: str | Path) -> Plan:
    """``load_spec`` + ``dataset_facts`` + ``expand``: the whole plan of a spec file."""
    spec = load_spec(path)
    return expand(spec, datasets=dataset_facts(spec))


def expand(spec: Spec, *, datasets: Mapping[tuple[str, int], DatasetFacts] | None = None) -> Plan:
    """All runs of ``spec`` (pure). ``datasets`` from ``dataset_facts`` (or None)."""
    if spec.blocks:  # sub-studies, expanded one by one
        return expand_blocks(spec, datasets)
    return expand_grid(spec, datasets)
