"""A recipe's points for its law in N: per model size N, the best cell by its mean loss over
seeds (the rule of ``analysis.tables.cells``), weighted by its seed count. ``scalelab report``
(``infinite_compute``), ``scalelab compare`` (``compare``) and
``scalelab.adaptive.recipe_cells`` use it.

The point of a size is (x = N / ``power_law.SCALE``, the cell's mean loss, m seeds): the
weighted least-squares fit of the seed means with weights m has the optimum of the fit of
every run (SUM_ij (f_i - y_ij)^2 = SUM_i m_i (f_i - ybar_i)^2 + const).

Pure polars/numpy: errors are ``AnalysisInputError``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.power_law import SCALE

__all__ = ["SizePoints", "size_points"]


@dataclass(frozen=True)
class SizePoints:
    """One recipe's points, one per size: x (k,) = N / SCALE ascending, y (k,) the best
    cell's mean loss, m (k,) its seed count (the fit's weights)."""

    x: np.ndarray
    y: np.ndarray
    m: np.ndarray

    @property
    def n(self) -> int:
        return int(self.x.size)


def size_points(rows: pl.DataFrame, scale: float = SCALE) -> SizePoints:
    """The points of one recipe's rows (``best_cells``' first frame, or any frame whose rows
    sharing N are seeds of one cell): per N, x = N / scale, the mean loss and the count."""
    if missing := {"N", "loss"} - set(rows.columns):
        raise AnalysisInputError(f"rows need columns N and loss; missing {sorted(missing)}")
    g = (rows.group_by(pl.col("N").cast(pl.Float64))
         .agg(pl.col("loss").cast(pl.Float64).mean(), pl.len().alias("m")).sort("N"))
    return SizePoints(g["N"].to_numpy() / scale, g["loss"].to_numpy(),
                      g["m"].to_numpy().astype(float))
