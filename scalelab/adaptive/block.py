"""Chosen runs of a study as a spec that ``scalelab sweep`` launches.

The spec keeps the study's top level (``name``, so it launches into the same sweep
directory; ``description``, ``base``, ``derive``, ``launcher``) and has one block,
``adaptive``, whose ``zip`` lists the chosen runs' values, one position per run:

    blocks:
      - name: adaptive
        zip:
          - model.preset: [twin-10k, twin-41k]
            data.epochs: [64, 128]
            optim.weight_decay: [1.0, 3.0]
            train.init_seed: [0, 1]      # with seeds: replicate r is seed seeds[r]
            data.seed: [0, 1]

For a study that is a block of its spec, that block's own ``base``, ``derive`` and
``launcher`` go into the ``adaptive`` block. The zip holds every grid key and zip key of
the study's grid, so every run's config, hence its run id, is the study's (a seed s of
``seeds`` is ``train.init_seed = data.seed = s``: ``scalelab.sweep.plan.grid``). The text
is checked before it is returned: it loads (``parse_spec``) and expands to exactly the
chosen run ids, else a RuntimeError (a bug, never a user's). Run names are
``adaptive_<values>``; every adaptive launch of a study names a run the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import yaml

from scalelab import yamlsafe
from scalelab.adaptive.study import Study
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.spec.load import parse_spec

__all__ = ["BLOCK_NAME", "BlockSpec", "block_spec", "block_tree", "plain_value", "written_spec"]

BLOCK_NAME = "adaptive"
TOP_KEYS = ("name", "description", "base", "derive", "launcher")
"""Top-level keys of the study's spec the written spec keeps."""
BLOCK_KEYS = ("base", "derive", "launcher")
"""Keys of the study's block (when it is one) the ``adaptive`` block keeps."""
SEED_KEYS = ("train.init_seed", "data.seed")


def block_tree(study: Study, run_ids: Sequence[str]) -> dict:
    """The spec (a YAML tree) of the runs ``run_ids`` of ``study`` (module docstring)."""
    if not run_ids:
        raise ValueError("no runs to write")
    tree = yamlsafe.load(study.spec.text, file=study.spec.file)
    out = {k: tree[k] for k in TOP_KEYS if tree.get(k) is not None}
    block: dict = {"name": BLOCK_NAME}
    raw = next((b for b in tree.get("blocks") or () if b.get("name") == study.block), None)
    if raw is not None:  # the study is a block of its spec: its own sections come along
        block |= {k: raw[k] for k in BLOCK_KEYS if raw.get(k) is not None}
    table = study.plan.table
    index = {rid: i for i, rid in enumerate(table["run_id"].to_list())}
    rows = table[[index[r] for r in run_ids]]
    keys = [*study.part.grid, *(k for group in study.part.zip for k in group)]
    values = {k: [plain_value(v) for v in rows[k].to_list()] for k in keys}
    if study.part.seeds is not None:
        values |= {k: [int(s) for s in rows["seed"].to_list()] for k in SEED_KEYS}
    block["zip"] = [values]
    out["blocks"] = [block]
    return out


@dataclass(frozen=True)
class BlockSpec:
    """The written spec's text and its plan (exactly the chosen runs)."""

    text: str
    plan: Plan


def block_spec(study: Study, run_ids: Sequence[str]) -> BlockSpec:
    """``block_tree`` as YAML text and its plan, checked to expand to exactly ``run_ids``."""
    return written_spec(block_tree(study, run_ids), f"the adaptive study {study.spec.file}",
                        study.datasets, run_ids)


def written_spec(tree: dict, what: str, datasets, run_ids: Sequence[str]) -> BlockSpec:
    """The spec ``tree`` as YAML text (headed by how to launch it) and its plan, checked to
    expand to exactly ``run_ids``: the one writer of ``next``'s spec, grid or any study."""
    text = (f"# {len(run_ids)} run(s) of {what}; launch them with: scalelab sweep THIS_FILE\n"
            + yaml.safe_dump(tree, sort_keys=False, default_flow_style=None))
    plan = expand(parse_spec(text, file="<adaptive block>"), datasets=datasets)
    got = plan.table["run_id"].to_list()
    if sorted(got) != sorted(run_ids) or len(got) != len(run_ids):
        raise RuntimeError(f"the adaptive block(s) expand to {sorted(got)}, not the chosen "
                           f"{sorted(run_ids)}")
    return BlockSpec(text, plan)


def plain_value(value):
    """A plan-table value as YAML writes it (tuples as lists)."""
    if isinstance(value, pl.Series):
        return value.to_list()
    return list(value) if isinstance(value, tuple) else value
