"""Replicate seeds in a sweep's runs, and the noise SD of one run's loss they give: the one
source of sigma for ``scalelab report``, ``scalelab demo`` and ``scalelab compare``.

Kim et al. 2025 ("Pre-training under infinite compute", arXiv 2509.14786) judge a recipe
that overfits by its best observed loss; how far that loss may lie from the recipe's level
is the seed-to-seed SD of one run's final loss (0.01-0.03 nats at the demo's sizes,
docs/calibration.md). Replicates are runs that differ only by their seed:

1. runs of one *cell* (``cells.cell_columns``: block, every config column but the seed keys
   ``cells.SEED_COLUMNS``, N and D), several at one N: seeds of a tuned cell, or the members
   of an ``ensemble`` block, which share their block's config and differ by ``member``;
2. the members of one ensemble (``ensembles/evals.parquet``: ``member_run_ids``, the runs
   ``scalelab ensemble`` averaged), joined into one group when the runs table agrees that
   they are one cell: the same N, D_unique and D_total, and no config column set to two
   different values. This brings in member 0, which is the tuned run of the cell the
   ensemble replicates (it sits in another block, with the ensemble block's config
   columns unset, so rule 1 alone cannot see it).

Only COMPLETED runs of the current spec (``tables.runs.drop_stale``) with a finite loss > 0
count, each run once. sigma = ``replicate_sigma`` over the groups (pooled
within-group SD, sum of (m_g - 1) degrees of freedom).

Why this and not the earlier sources. The report took sigma from the ensemble evals' member
losses (one group, by construction of the ensemble) and compare, which saw one run per size,
from the scatter of a recipe's own points around a quadratic in log N. The scatter absorbs any
misfit of the quadratic (on the demo it was twice the seed SD), so it is a fallback only; the
member losses in the evals are the members' final losses re-evaluated (equal to the runs
table's to ~1e-6), so reading them from the runs table with the evals' grouping gives the
same numbers, and also counts replicate seeds of tuned cells, which the evals never held.
Both commands read the same runs and the same evals, so they get the same sigma.

Pure polars/numpy: frames in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.tables.cells import cell_columns
from analysis.tables.runs import drop_stale

__all__ = ["Replicates", "find_replicates", "replicate_sigma", "scatter_sigma"]

_SAME_RUN_KEYS = ("N", "D_unique", "D_total")
"""Columns every member of an ensemble must share to be taken as seeds of one cell."""


@dataclass(frozen=True)
class Replicates:
    """The replicate groups of a sweep's runs and the SD of one run's loss they give."""

    sigma: float
    """Pooled within-group SD of one run's loss (nan: no group of >= 2 runs)."""
    seeds: int
    """Runs in groups of >= 2."""
    groups: int
    """Groups of >= 2 runs (cells, or ensembles joined to their cell)."""
    dof: int
    """Degrees of freedom of sigma: seeds - groups."""

    @property
    def found(self) -> bool:
        return self.groups > 0

    def source(self) -> str:
        """Where sigma comes from, in words (``RecipeLevel.sigma_from``)."""
        cells = "cell" if self.groups == 1 else "cells"
        return f"from {self.seeds} replicate seeds in {self.groups} {cells}"


NONE = Replicates(math.nan, 0, 0, 0)
"""No replicate seeds."""


def _key(row: tuple) -> tuple:
    return tuple(tuple(v) if isinstance(v, list) else v for v in row)


def _root(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _one_cell(frame: pl.DataFrame, config: list[str]) -> bool:
    """Whether these runs may be seeds of one cell: equal N and D, and no config column
    set to two different values."""
    for col in (*_SAME_RUN_KEYS, *config):
        if col in frame.columns and frame[col].drop_nulls().n_unique() > 1:
            return False
    return True


def _ensemble_groups(ensembles: pl.DataFrame | None) -> list[list[str]]:
    if ensembles is None or "member_run_ids" not in ensembles.columns:
        return []
    ids = ensembles["member_run_ids"].drop_nulls().unique().sort().to_list()
    return [[s for s in g.split(",") if s] for g in ids]


def find_replicates(runs: pl.DataFrame, ensembles: pl.DataFrame | None = None, *,
                    loss: str = "final_loss") -> Replicates:
    """The replicate groups of ``runs`` (module docstring) and their pooled sigma of one
    run's ``loss``. ``ensembles``: the sweep's ensemble evals, or None."""
    if loss not in runs.columns or "N" not in runs.columns:
        return NONE
    runs, _ = drop_stale(runs)
    ok = pl.col(loss).cast(pl.Float64).is_finite() & (pl.col(loss).cast(pl.Float64) > 0)
    if "state" in runs.columns:
        ok = ok & (pl.col("state") == "COMPLETED")
    runs = runs.filter(ok)
    if "run_id" in runs.columns:
        runs = runs.unique("run_id", keep="first", maintain_order=True)
    if runs.height < 2:
        return NONE
    cols = cell_columns(runs)
    config = [c for c in cols if c not in ("block", *_SAME_RUN_KEYS)]
    parent = list(range(runs.height))
    first: dict[tuple, int] = {}
    for i, key in enumerate(runs.select(cols).rows()):  # rule 1: one cell
        j = first.setdefault(_key(key), i)
        parent[_root(parent, i)] = _root(parent, j)
    if "run_id" in runs.columns:  # rule 2: one ensemble, where the runs agree
        index = {str(r): i for i, r in enumerate(runs["run_id"].cast(pl.String).to_list())}
        for ids in _ensemble_groups(ensembles):
            rows = [index[r] for r in ids if r in index]
            if len(rows) >= 2 and _one_cell(runs.select(pl.all().gather(rows)), config):
                for i in rows[1:]:
                    parent[_root(parent, i)] = _root(parent, rows[0])
    y = runs[loss].cast(pl.Float64).to_numpy()
    roots = np.array([_root(parent, i) for i in range(runs.height)])
    groups = [y[roots == r] for r in np.unique(roots)]
    groups = [g for g in groups if g.size >= 2]
    if not groups:
        return NONE
    seeds = int(sum(g.size for g in groups))
    return Replicates(replicate_sigma(groups), seeds, len(groups), seeds - len(groups))


def replicate_sigma(groups: Sequence[Sequence[float]]) -> float:
    """Pooled within-size SD of one run's loss from replicate seeds: groups of losses, one
    group per size (or per any setting the seeds share). sqrt(SUM_g SUM_i (y_gi - ybar_g)^2 /
    SUM_g (m_g - 1)); groups of one seed carry no information. The SD of a mean of m seeds is
    this / sqrt(m)."""
    ss, dof = 0.0, 0
    for g in groups:
        v = np.asarray(g, dtype=float)
        if v.size >= 2:
            ss += float(np.sum((v - v.mean()) ** 2))
            dof += v.size - 1
    if dof == 0:
        raise AnalysisInputError("replicate_sigma needs a size with >= 2 seeds")
    return float(np.sqrt(ss / dof))


def scatter_sigma(n, loss) -> float:
    """SD of one loss from the scatter around a smooth curve when there are no replicate
    seeds: the residual SD of a quadratic in log N (it follows a U-shaped curve, which a power
    law does not), sqrt(SSE / (n - 3)); needs >= 4 sizes. It also absorbs any misfit of the
    quadratic, so it errs large (a conservative verdict)."""
    n = np.asarray(n, dtype=float)
    y = np.asarray(loss, dtype=float)
    if n.size < 4 or np.unique(n).size < 3:
        raise AnalysisInputError(f"scatter_sigma needs >= 4 points at >= 3 sizes, got {n.size}")
    t = np.log(n)
    X = np.stack([np.ones_like(t), t - t.mean(), (t - t.mean()) ** 2], axis=1)  # (n, 3)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(np.sqrt(np.sum((y - X @ coef) ** 2) / (n.size - 3)))
