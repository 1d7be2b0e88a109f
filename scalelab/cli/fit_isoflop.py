"""``scalelab fit SWEEP --isoflop``: approach 2 (``analysis.isoflop.isoflop``) on a sweep's runs.

Prints one table of compute budgets (optimum with bootstrap SEs, kept or excluded and
why; budgets with too few points are counted in the caption, not listed), the exponents
a and b with their CIs, and saves the two-panel plot (``<sweep>/fit/isoflop`` by default).
Cells are plain text (never rich markup: values come from the user's runs table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["isoflop_table", "run_isoflop"]


def _se(v: float, se: float) -> str:
    return f"{v:.4g}" if math.isnan(se) else f"{v:.4g} ± {se:.2g}"


def isoflop_table(optima: pl.DataFrame, where: Sequence[str] = ()) -> Table:
    """A row per budget with enough points; the others counted in the caption."""
    few = optima.filter(pl.col("reason").str.starts_with("too few"))
    caption = [f"where {' AND '.join(where)}"] if where else []
    if few.height:
        caption.append(
            f"{few.height} budget(s) with too few points ({few['n_points'].sum()} runs) not shown"
        )
    grid = Table(title="isoFLOP budgets (approach 2)", caption="; ".join(caption) or None)
    for col in ("C (FLOPs)", "runs", "N_opt", "D_opt", "loss_opt", "status"):
        grid.add_column(col, overflow="fold")
    for r in optima.filter(~pl.col("reason").str.starts_with("too few")).iter_rows(named=True):
        status = "kept" if r["kept"] else f"excluded: {r['reason']}"
        cells = (
            f"{r['C']:.3g}",
            str(r["n_points"]),
            _se(r["N_opt"], r["N_opt_se"]),
            _se(r["D_opt"], r["D_opt_se"]),
            _se(r["loss_opt"], r["loss_opt_se"]),
            status,
        )
        grid.add_row(*(Text(c) for c in cells))
    return grid


def run_isoflop(table, *, where: Sequence[str], loss: str, bootstrap: int, seed: int,
                out: Path) -> None:  # fmt: skip
    """Fit, print and plot (the caller maps AnalysisInputError to a UserError)."""
    from analysis.plots.isoflop import plot_isoflops
    from analysis.isoflop.from_runs import isoflop_selection
    from analysis.plots.plots import save_figure

    sel = isoflop_selection(table, where=where, loss=loss, n_boot=bootstrap, seed=seed)
    fit = sel.fit
    console = Console()
    for note in sel.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    console.print(isoflop_table(fit.optima, where))
    pct = f"{100 * fit.level:g}% CI"
    for name, v, ci in (("N_opt ∝ C^a: a", fit.a, fit.a_ci), ("D_opt ∝ C^b: b", fit.b, fit.b_ci)):
        tail = f" ({pct} {ci[0]:.4f}, {ci[1]:.4f})" if bootstrap else " (no bootstrap: no CI)"
        console.print(f"{name} = {v:.4f}{tail}", markup=False, highlight=False)
    fig = plot_isoflops(fit)
    console.print(f"plot: {save_figure(fig, out)[0]}", markup=False, highlight=False)
