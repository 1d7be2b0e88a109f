"""The loss profiled over a second hyperparameter: each (group, hp) cell at its best lr.

An optimal batch size exists only with the lr tuned per batch (McCandlish et al. 2018,
arXiv 1812.06162; Filatov et al. 2025, arXiv 2510.03871: optimal (lr, batch) pairs). With
a grid over both, each (x..., hp) cell holds several sub-cells, one per value of the
profiled column ``over`` (e.g. ``optim.lr``). Its profiled loss is the bottom of the
local quadratic in ln ``over`` around the best sub-cell (``analysis.transfer.optimum.fit_window``,
the same window as the hp optimum itself), or, where that quadratic is refused (the best
at the edge of the values tried, no valley, fewer than 3 values) or its bottom lies too far
below the best sub-cell even on 3 cells ('too deep': ``analysis.transfer.optimum.narrowed``,
e.g. a 3-point quadratic through a diverged run at the smallest batch), the best sub-cell's
loss, flagged: the profiled loss may then be overstated, never invented. Before this check a
too-deep bottom was used: on a published lr x batch study (3-4 batch sizes per cell) such
profiled losses, far below every run, made the lr law's exponent in N -2.86 (truth by the
study's bootstrap -0.71); on synthetic studies of that shape (bench/transfer_coverage.py)
the exponent's sd fell from 0.46 to 0.054 with 4 batch sizes.

Why the quadratic's bottom and not the best observed: on a grid a factor 2 apart the best
observed loss misses the bottom by up to k·(ln 2 / 2)², an amount that drifts with the hp
when the lr grid's centre does, and biases the hp law. On ``synthetic_joint_sweep``'s
truth (B* ∝ N^0.3, 6 sizes, 5 lr values per cell, 100 studies) the best-observed profile
biased the exponent by +0.008 (1.5 SD; its 95% CI covered the truth in 83%), the
quadratic's bottom by -0.001 (98%).

Shapes: a cell has m sub-cells; ``fit_window`` takes [m] arrays.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.transfer.optimum import fit_window, narrowed, robust_sigma2, typical_curvature

__all__ = ["profile_cells"]


def profile_cells(sub: pl.DataFrame, keys: list[str], over: str) -> pl.DataFrame:
    """``sub``: one row per (keys..., ``over``) with loss, n, ss, run_ids, seeds (cell
    means). Returns one row per ``keys`` with the same columns plus ``over`` (the profiled
    optimum of ``over``, or the best sub-cell's value), ``over_tried`` (values tried) and
    ``over_edge`` (None when the quadratic's bottom was used, else the reason it was not:
    'lowest', 'highest', 'no valley', 'too few', 'too deep'). n, ss, run_ids and seeds are
    the best sub-cell's (the runs nearest the profiled optimum)."""
    parts = sub.sort([*keys, over]).partition_by(keys, maintain_order=True)
    found = []
    for g in parts:
        u = np.log(g[over].to_numpy().astype(float))  # [m]
        y = g["loss"].to_numpy().astype(float)  # [m]
        found.append((g, u, y, fit_window(u, y, g["n"].to_numpy(), over)))
    windows = [w for *_, w in found]
    q2_typ = typical_curvature(windows)
    ss, dof = float(sub["ss"].sum()), int((sub["n"] - 1).sum())
    s2, s2_dof = robust_sigma2(windows)
    if not np.isfinite(s2) or (dof > 0 and ss / dof > s2):
        s2, s2_dof = (ss / dof, dof) if dof > 0 else (0.0, 0)
    rows = []
    for g, u, y, w in found:
        best = int(np.argmin(y))
        row = g.row(best, named=True)
        w, status = narrowed(w, u, y, g["n"].to_numpy().astype(float), over, q2_typ, s2, s2_dof)
        deep = status == "deep"
        if w.why is None and not deep:
            row.update(loss=w.bottom, over=float(np.exp(w.u_star)), over_edge=None)
        else:
            edge = ("too deep" if deep else "too few" if len(u) < 3 else "lowest" if best == 0
                    else "highest" if best == len(u) - 1 else "no valley")
            row.update(over=float(np.exp(u[best])), over_edge=edge)
        row["over_tried"] = len(u)
        del row[over]
        rows.append(row)
    schema = {**{c: t for c, t in sub.schema.items() if c != over}, "over": pl.Float64,
              "over_edge": pl.String, "over_tried": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row")
