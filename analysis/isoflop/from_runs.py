"""A sweep's runs table -> approach 2 (``scalelab fit SWEEP --isoflop``'s engine).

The runs pass through the same steps as a law fit (``analysis.fit.grouped``): x columns
added (C from ``flops``, D from ``D_total``; ``analysis.fit.xvars``), ``--where`` conditions
(``analysis.tables.select``), fit-ready rows (COMPLETED, finite positive N, D, loss and C;
``analysis.tables.runs``), each exclusion counted in a note. Then ``fit_isoflops`` on C, N, D,
loss; without a ``flops`` column C = 6 N D.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.xvars import fit_ready, with_x_columns
from analysis.isoflop.isoflop import IsoFlopFit, fit_isoflops
from analysis.isoflop.window import DEFAULT_WINDOW
from analysis.tables.select import select_runs

__all__ = ["IsoFlopSelection", "isoflop_selection"]


@dataclass(frozen=True)
class IsoFlopSelection:
    """The fit, and one note per excluded run kind, grouping or bootstrap caveat."""

    fit: IsoFlopFit
    notes: tuple[str, ...]
    n_selected: int


def isoflop_selection(
    table: pl.DataFrame,
    *,
    where: Sequence[str] = (),
    loss: str = "final_loss",
    n_boot: int = 1000,
    seed: int = 0,
    window: float | None = DEFAULT_WINDOW,
    method: str = "parabola",
    joint: bool = False,
) -> IsoFlopSelection:
    """Approach 2 on the rows of the runs table ``table`` meeting ``where`` (``window``,
    ``method``, ``joint``: ``fit_isoflops``'s)."""
    source = with_x_columns(table)
    selected = select_runs(source, where)
    ready = fit_ready(selected, "C" if "C" in selected.columns else "N", loss=loss)
    if ready.data.height == 0:
        what = "runs after --where" if where else "fit-ready runs"
        raise AnalysisInputError(f"0 {what}: none is COMPLETED with a finite N, D and loss")
    fit = fit_isoflops(ready.data, compute="C", N="N", D="D", loss="loss", n_boot=n_boot,
                       seed=seed, window=window, method=method, joint=joint)  # fmt: skip
    return IsoFlopSelection(fit, ready.notes + fit.notes, selected.height)
