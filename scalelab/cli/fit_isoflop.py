"""``scalelab fit SWEEP --isoflop``: approach 2 (``analysis.isoflop.isoflop``) on a sweep's runs.

Prints one table of compute budgets (optimum with bootstrap SEs, kept or excluded and
why; budgets with too few points are counted in the caption, not listed), the exponents
a and b with their CIs, and saves the two-panel plot (``<sweep>/fit/isoflop`` by default).
With ``--group-by``: one fit per group, a row each in one table (budgets kept, a and b
with CIs, warning), a plot per group (``isoflop-<group>``). A warning (fewer than 3 kept
budgets) is one printed line. Cells are plain text (never rich markup: values come from
the user's runs table).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalelab.cli.wide import print_wide

__all__ = ["groups_table", "isoflop_table", "run_isoflop"]


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


def _ci(ci: tuple[float, float]) -> str:
    return "" if math.isnan(ci[0]) else f" ({ci[0]:.4f}, {ci[1]:.4f})"


def groups_table(
    rows: Sequence[tuple[str, object]], level: float, where: Sequence[str] = ()
) -> Table:
    """One row per group: budgets kept, a and b with their CIs, its warning."""
    grid = Table(title="isoFLOP fits by group (approach 2)",
                 caption=f"where {' AND '.join(where)}" if where else None)  # fmt: skip
    for col in ("group", "budgets kept", f"a ({100 * level:g}% CI)", f"b ({100 * level:g}% CI)",
                "warning"):  # fmt: skip
        grid.add_column(col, overflow="fold")
    for label, fit in rows:
        cells = (label, f"{fit.kept.height} of {fit.optima.height}", f"{fit.a:.4f}{_ci(fit.a_ci)}",
                 f"{fit.b:.4f}{_ci(fit.b_ci)}", "; ".join(fit.warnings))  # fmt: skip
        grid.add_row(*(Text(c) for c in cells))
    return grid


def _slug(label: str) -> str:
    return re.sub(r"[^\w.=+-]+", "_", label).strip("_") or "group"


def _print(console: Console, line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def run_isoflop(table, *, where: Sequence[str], loss: str, bootstrap: int, seed: int,
                out: Path, group_by: Sequence[str] = (), window: float | None = 8.0,
                method: str = "parabola", joint: bool = False) -> None:  # fmt: skip
    """Fit, print and plot; with ``group_by``, one fit per group in one table and a plot
    per group (``<out>-<group>``). The caller maps AnalysisInputError to a UserError; a
    group that cannot be fitted raises one, prefixed with its label."""
    from analysis.errors import AnalysisInputError
    from analysis.fit.grouped import group_label, group_runs
    from analysis.isoflop.from_runs import isoflop_selection
    from analysis.plots.isoflop import plot_isoflops
    from analysis.plots.plots import save_figure

    console = Console()
    if not group_by:
        sel = isoflop_selection(table, where=where, loss=loss, n_boot=bootstrap, seed=seed,
                                 window=window, method=method, joint=joint)
        fit = sel.fit
        for note in sel.notes:
            _print(console, f"note: {note}")
        if joint:
            _print(console, "note: the joint line: one least-squares fit of every kept budget's parabola "
                            "with its vertex on ln N_opt = c + a ln C (docs/isoflop.md)")
        print_wide(isoflop_table(fit.optima, where), console)
        pct = f"{100 * fit.level:g}% CI"
        lines = (("N_opt ∝ C^a: a", fit.a, fit.a_ci), ("D_opt ∝ C^b: b", fit.b, fit.b_ci))
        for name, v, ci in lines:
            tail = f" ({pct} {ci[0]:.4f}, {ci[1]:.4f})" if bootstrap else " (no bootstrap: no CI)"
            _print(console, f"{name} = {v:.4f}{tail}")
        for w in fit.warnings:
            _print(console, f"warning: {w}")
        _print(console, f"plot: {save_figure(plot_isoflops(fit), out)[0]}")
        return
    fits = []
    for key, part in group_runs(table, group_by):
        label = group_label(key)
        try:
            sel = isoflop_selection(part, where=where, loss=loss, n_boot=bootstrap, seed=seed,
                                    window=window, method=method, joint=joint)
        except AnalysisInputError as err:
            raise AnalysisInputError(f"group {label}: {err}") from None
        fits.append((label, sel))
    for label, sel in fits:
        for note in sel.notes:
            _print(console, f"note [{label}]: {note}")
    print_wide(groups_table([(lab, s.fit) for lab, s in fits], fits[0][1].fit.level, where), console)
    for label, sel in fits:
        for w in sel.fit.warnings:
            _print(console, f"warning [{label}]: {w}")
    for label, sel in fits:
        stem = out.with_name(f"{out.name}-{_slug(label)}")
        fig = plot_isoflops(sel.fit, title=f"isoFLOP profiles [{label}], {sel.fit.summary()}")
        _print(console, f"plot: {save_figure(fig, stem)[0]}")
