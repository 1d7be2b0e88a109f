"""Facts the planner needs about the spec's local datasets (the one part of planning that
reads disk): vocabulary size and training-split size, keyed by (dataset, val_tokens)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from scalelab.errors import UserError

if TYPE_CHECKING:
    from scalelab.sweep.spec.load import Spec

__all__ = ["DatasetFacts", "dataset_facts"]


class DatasetFacts(NamedTuple):
    """What the planner needs from a dataset on this machine."""

    vocab_size: int
    train_tokens: int
    """Size of the training split (after carving off data.val_tokens)."""



def dataset_facts(spec: Spec) -> dict[tuple[str, int], DatasetFacts]:
    """Facts of the spec's datasets that exist here (I/O); keyed by (dataset, val_tokens).
    'default' is built on first use. Datasets not on this machine are left out."""
    if spec.blocks:
        return {k: v for _, block in spec.blocks for k, v in dataset_facts(block).items()}
    from scalelab.config import DataConfig
    from scalelab.data import open_dataset

    out = {}
    for dataset, val_tokens in _dataset_keys(spec):
        if dataset != "default" and not Path(dataset).expanduser().exists():
            continue
        cfg = DataConfig(dataset=dataset, val_tokens=val_tokens, seq_len=1)
        try:
            ds = open_dataset(cfg)
        except UserError as err:
            raise spec.error(err.detail, f"base.{err.key}" if err.key else "base.data") from None
        out[(dataset, val_tokens)] = DatasetFacts(ds.vocab_size, len(ds.train))
    return out


def _dataset_keys(spec: Spec) -> set[tuple[str, int]]:
    def candidates(key: str, default: Any) -> list[Any]:
        if key in spec.grid:
            return list(spec.grid[key])
        for group in spec.zip:
            if key in group:
                return list(group[key])
        return [default]

    return set(itertools.product(candidates("data.dataset", spec.base.data.dataset),
                                 candidates("data.val_tokens", spec.base.data.val_tokens)))
