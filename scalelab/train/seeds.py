"""Seeds of a run: weight init and data order, and how ensemble members shift them.

Ensemble member ``k`` (``RunConfig.member``) trains with

    init seed = train.init_seed + 1000 * k
    data seed = data.seed       + 1000 * k

so members differ in both initialisation and data order, as in Kim et al. 2025 (member k
uses train seed = data seed = k; arXiv 2509.14786) up to the relabelling k -> 1000·k. The
stride keeps members apart from the spec's ``seeds`` axis (any seed < 1000) so that
(seed s, member k) never trains the same model as (seed s', member k').
``data.subset_seed`` (which U tokens), when set, is *not* offset: the planner sets it so
that the members of an ensemble share their unique tokens and differ only in order.
"""

from __future__ import annotations

from typing import NamedTuple

from scalelab.config import RunConfig

__all__ = ["MEMBER_STRIDE", "Seeds", "run_seeds"]

MEMBER_STRIDE = 1000


class Seeds(NamedTuple):
    init: int
    """Seeds the weight init (``Llama.init_weights``) and the global torch/numpy/python RNGs."""
    data: int
    """Seeds which unique tokens are drawn and the per-epoch order (``data.seed``)."""


def run_seeds(cfg: RunConfig) -> Seeds:
    offset = MEMBER_STRIDE * cfg.member
    return Seeds(init=cfg.train.init_seed + offset, data=cfg.data.seed + offset)
