"""The held-out check of a transfer law: refit without the largest size(s), predict theirs.

The K largest distinct values of the law's first variable (N for ("N",) and ("N", "D"),
C for ("C",)) are held out: the law is refitted on the other runs alone (their optima and
their pooled noise: no held-out run enters it) and predicts each held-out group's optimum
with its prediction interval (``analysis.transfer.law``). The observed optimum is the
held-out group's own (``fit_transfer`` on every run). Reported: the error in ln units
(observed - predicted), the ratio observed / predicted, and whether the interval covers
the observed optimum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.xvars import X_SOURCES
from analysis.transfer.transfer import TransferFit, fit_transfer, group_label

__all__ = ["HeldOut", "holdout_check"]


@dataclass(frozen=True)
class HeldOut:
    """One held-out group. ``x``: its values; ``predicted``, ``lo``, ``hi``: the refitted
    law's hp* and prediction interval there; ``observed``, ``obs_lo``, ``obs_hi``: its own
    optimum and interval (NaN with ``why`` when its optimum was refused); ``err_log``:
    ln(observed / predicted); ``covered``: lo <= observed <= hi."""

    x: dict[str, float]
    predicted: float
    lo: float
    hi: float
    observed: float
    obs_lo: float
    obs_hi: float
    why: str | None = None

    @property
    def err_log(self) -> float:
        return float(np.log(self.observed / self.predicted))

    @property
    def ratio(self) -> float:
        return float(self.observed / self.predicted)

    @property
    def covered(self) -> bool:
        return bool(self.lo <= self.observed <= self.hi)

    def label(self) -> str:
        return group_label(self.x, tuple(self.x))


def holdout_check(df: pl.DataFrame, x: Sequence[str] = ("N",), hp: str = "optim.lr",
                  k: int = 1, *, loss: str = "final_loss", level: float = 0.95,
                  full: TransferFit | None = None,
                  best_over: str | None = None) -> tuple[TransferFit, list[HeldOut]]:
    """(the law refitted without the ``k`` largest groups, one ``HeldOut`` per held-out
    group). ``full``: ``fit_transfer`` on every run, when the caller has it already (its
    ``best_over`` is then used); ``best_over``: as in ``fit_transfer``."""
    x = tuple(x)
    full = full or fit_transfer(df, x, hp, loss=loss, level=level, best_over=best_over)
    best_over = full.best_over
    first = x[0]
    values = np.unique(full.table[first].to_numpy())
    if not 1 <= k < len(values):
        raise AnalysisInputError(f"--holdout-largest {k}: there are {len(values)} distinct "
                                 f"{first} values; hold out 1 to {len(values) - 1}")
    cut = float(values[-k])
    src = first if first in df.columns else X_SOURCES.get(first, first)
    train = fit_transfer(df.filter(pl.col(src).cast(pl.Float64) < cut), x, hp, loss=loss,
                         level=level, best_over=best_over)
    out = []
    for row in full.table.filter(pl.col(first) >= cut).iter_rows(named=True):
        at = {v: float(row[v]) for v in x}
        pred, lo, hi = train.predict(**at)
        nan = float("nan")
        obs = (row["hp_opt"], row["hp_lo"], row["hp_hi"]) if row["why"] is None else (nan, nan, nan)
        out.append(HeldOut(at, pred, lo, hi, *obs, why=row["why"]))
    return train, out
