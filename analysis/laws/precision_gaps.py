"""Model-free cost of a training precision: its loss minus the reference's, cell by cell.

The precision law (``analysis.fit.precision``) turns the gap between formats into an
effective-parameter multiplier, which needs the base law to describe the runs; where it
does not (a CPU twin whose loss rises with N past the unique-token budget, say), the
multiplier is not identified and the question "what does FP4 cost at my data budget?" still
has a direct answer: at each (N, D, U) cell both formats ran, the difference of their mean
losses over seeds; over the cells, its mean with a t-interval from the cells' scatter
(each cell one observation, so the interval holds the seed noise and the cell-to-cell
variation both). Pure polars and scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl
from scipy import stats

__all__ = ["MIN_CELLS", "Gap", "paired_gaps"]

MIN_CELLS = 3
"""Cells a gap needs for an interval (2 degrees of freedom)."""


@dataclass(frozen=True)
class Gap:
    """``fmt``'s mean loss minus the reference's over ``cells`` matched cells (nats)."""

    fmt: str
    epochs: float | None
    """The epoch count the cells share; None over every epoch count."""
    mean: float
    ci: tuple[float, float] | None
    """The 95% t-interval over cells; None with fewer than ``MIN_CELLS`` cells."""
    cells: int

    def describe(self) -> str:
        where = "all cells" if self.epochs is None else f"{self.epochs:g} epochs"
        if self.ci is None:
            return f"{self.fmt} ({where}, {self.cells} cell(s)): {self.mean:+.4f} nats, too few cells for an interval"
        lo, hi = self.ci
        verdict = ("worse than the reference" if lo > 0 else "better than the reference" if hi < 0
                   else "no detectable difference")
        return (f"{self.fmt} ({where}, {self.cells} cells): {self.mean:+.4f} nats, 95% CI "
                f"[{lo:+.4f}, {hi:+.4f}]: {verdict}")


def _gap(fmt: str, epochs: float | None, diffs: list[float], level: float) -> Gap:
    k = len(diffs)
    mean = math.fsum(diffs) / k
    if k < MIN_CELLS:
        return Gap(fmt, epochs, mean, None, k)
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (k - 1))
    half = float(stats.t.ppf((1 + level) / 2, k - 1)) * sd / math.sqrt(k)
    return Gap(fmt, epochs, mean, (mean - half, mean + half), k)


def paired_gaps(data: pl.DataFrame, reference: str, *, column: str = "precision",
                level: float = 0.95) -> list[Gap]:
    """Per format other than ``reference``: its gap over all matched cells, then per epoch
    count (epochs = D / U). ``data``: N, D, U, loss and ``column`` (one row per run)."""
    cells = (data.group_by(column, "N", "D", "U").agg(pl.col("loss").mean())
             .with_columns((pl.col("D") / pl.col("U")).round(6).alias("epochs")))
    ref = cells.filter(pl.col(column) == reference).select("N", "D", "U", pl.col("loss").alias("ref"))
    out = []
    for fmt in sorted(set(cells[column].to_list()) - {reference}):
        j = cells.filter(pl.col(column) == fmt).join(ref, on=["N", "D", "U"]).sort("epochs", "N")
        if j.height == 0:
            continue
        diff = (j["loss"] - j["ref"]).to_list()
        out.append(_gap(fmt, None, diff, level))
        for (e,), sub in j.group_by("epochs", maintain_order=True):
            out.append(_gap(fmt, float(e), (sub["loss"] - sub["ref"]).to_list(), level))
    return out
