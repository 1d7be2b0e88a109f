"""Each group's optimal hyperparameter: a local quadratic in log hp around the best cell.

A *group* is one size (one N, one (N, D) or one C); a *cell* is one hp value of a group,
its loss the mean over the runs that share it (seed replicates). Per group, with
u = ln hp and the cells sorted by u:

1. the best cell (lowest mean loss) must be inside the grid: at its lowest or highest hp
   the optimum may lie beyond the grid, and the group is refused (one line, ``why``);
2. the window is the best cell and up to two neighbours on each side, as many on both
   sides (3 or 5 cells, the best in the middle);
3. loss = q0 + q1·u + q2·u², weighted least squares with weight n_i (a cell mean of n_i
   runs has variance σ²/n_i); q2 <= 0 (no valley) and u* = -q1 / (2 q2) outside the
   window's range are refused;
4. SE(u*) by the delta method, gradient g = (0, -1/(2 q2), q1/(2 q2²)), var = σ² gᵀ M g
   with M = (XᵀWX)⁻¹ (the window's unscaled covariance).

σ² is the loss noise, pooled over the accepted groups (the runs' final-loss noise is taken
to be one level across sizes): the windows' weighted residual variance (Σ RSS / Σ dof, so a
5-cell window adds 2 dof and a 3-cell window none), and where cells have seed replicates
the pooled within-cell variance too; the larger of the two is used, so tight seeds do not
hide the quadratic's lack of fit (an asymmetric valley). Its dof set the t quantile of
each group's interval. No 5-cell window and no replicates: no σ², an AnalysisInputError.

Shapes: a group has m cells; the window w <= 5 of them; ``X`` is [w, 3].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from analysis.errors import AnalysisInputError

__all__ = ["HALF_WINDOW", "Noise", "Window", "fit_window", "locate_optima", "pooled_noise"]

HALF_WINDOW = 2
"""Cells on each side of the best one in the quadratic's window (at most)."""


@dataclass(frozen=True)
class Window:
    """The quadratic of one group, or why there is none.

    ``q``: (q0, q1, q2) of loss = q0 + q1 u + q2 u², u = ln hp; ``M``: [3, 3] unscaled
    covariance (XᵀWX)⁻¹; ``rss``: weighted residual sum of squares; ``dof``: cells - 3;
    ``u_lo``, ``u_hi``: the window's ends; ``why``: the refusal (None when accepted)."""

    q: np.ndarray
    M: np.ndarray
    rss: float
    dof: int
    u_lo: float
    u_hi: float
    why: str | None = None

    @property
    def u_star(self) -> float:
        """The valley's bottom -q1 / (2 q2) (ln hp)."""
        return float(-self.q[1] / (2.0 * self.q[2]))

    def var_unit(self) -> float:
        """gᵀ M g: var(u*) per unit loss variance σ² (delta method)."""
        q0, q1, q2 = self.q
        g = np.array([0.0, -1.0 / (2.0 * q2), q1 / (2.0 * q2 * q2)])
        return float(g @ self.M @ g)


@dataclass(frozen=True)
class Noise:
    """The pooled loss noise: ``sigma2`` (variance of one run's loss), its ``dof`` and its
    ``source`` ('fit residuals', 'seed replicates')."""

    sigma2: float
    dof: int
    source: str


def fit_window(u: np.ndarray, loss: np.ndarray, n: np.ndarray, hp: str) -> Window:
    """The quadratic around the best of a group's cells: ``u`` [m] sorted ln hp, ``loss`` [m]
    cell means, ``n`` [m] runs per cell. Refusals come back in ``why``, never raised."""
    m = len(u)
    nothing = np.full(3, np.nan)
    if m < 3:
        return Window(nothing, np.full((3, 3), np.nan), np.nan, 0, np.nan, np.nan,
                      why=f"{m} {hp} value(s); need >= 3 around the best")
    best = int(np.argmin(loss))
    if best in (0, m - 1):
        end = "lowest" if best == 0 else "highest"
        return Window(nothing, np.full((3, 3), np.nan), np.nan, 0, np.nan, np.nan,
                      why=f"best run at the grid's {end} {hp} ({np.exp(u[best]):.4g}): "
                          "the optimum may lie beyond it; extend the grid")
    half = min(HALF_WINDOW, best, m - 1 - best)
    sl = slice(best - half, best + half + 1)
    uw, yw, nw = u[sl], loss[sl], n[sl].astype(float)
    X = np.stack([np.ones_like(uw), uw, uw * uw], axis=1)  # [w, 3]
    XtW = X.T * nw  # [3, w]
    M = np.linalg.inv(XtW @ X)
    q = M @ (XtW @ yw)
    r = yw - X @ q
    rss = float(np.sum(nw * r * r))
    lo, hi = float(uw[0]), float(uw[-1])
    if not q[2] > 0:
        return Window(q, M, rss, len(uw) - 3, lo, hi,
                      why=f"no valley: the quadratic in log {hp} opens downward (q2 = {q[2]:.3g})")
    w = Window(q, M, rss, len(uw) - 3, lo, hi)
    if not lo <= w.u_star <= hi:
        return Window(q, M, rss, len(uw) - 3, lo, hi,
                      why=f"the quadratic's minimum {np.exp(w.u_star):.4g} lies outside the "
                          f"fitted {hp} range [{np.exp(lo):.4g}, {np.exp(hi):.4g}]")
    return w


def pooled_noise(windows: list[Window], within_ss: float, within_dof: int) -> Noise:
    """σ² from the accepted windows' residuals and the cells' seed replicates (``within_ss``:
    Σ over cells of Σ (loss - cell mean)², ``within_dof``: Σ (n_i - 1)); the larger."""
    dof_fit = sum(w.dof for w in windows)
    found = []
    if dof_fit > 0:
        found.append(Noise(sum(w.rss for w in windows) / dof_fit, dof_fit, "fit residuals"))
    if within_dof > 0:
        found.append(Noise(within_ss / within_dof, within_dof, "seed replicates"))
    if not found:
        raise AnalysisInputError(
            "cannot estimate the loss noise: every accepted group has a 3-point window and no "
            "cell has seed replicates; add hp values around each optimum (5-point windows) or "
            "seeds")
    best = max(found, key=lambda z: z.sigma2)
    if best.sigma2 <= 0:  # noiseless input: keep SEs positive and tiny, not zero
        return Noise(float(np.finfo(float).tiny), best.dof, best.source)
    return best


def locate_optima(cells: pl.DataFrame, x: tuple[str, ...], hp: str,
                  level: float = 0.95) -> tuple[pl.DataFrame, Noise]:
    """Per group of ``cells`` (columns: x..., ``u``, ``loss``, ``n``, ``ss``: one row per
    (group, hp) cell), its optimum. Returns the table (one row per group, sorted by x) and
    the pooled noise. Table columns: x..., n_cells, n_runs, best_hp, hp_opt, u_opt, se_u,
    hp_lo, hp_hi (``level`` interval, t with the noise's dof), loss_opt, q0, q1, q2,
    hp_window_lo, hp_window_hi, why (None: accepted)."""
    groups = cells.sort([*x, "u"]).partition_by(list(x), maintain_order=True, as_dict=True)
    found = []
    for key, g in groups.items():
        u, y, n = (g[c].to_numpy().astype(float) for c in ("u", "loss", "n"))
        found.append((key, g, fit_window(u, y, n, hp)))
    accepted = [w for _, _, w in found if w.why is None]
    ok_cells = [g for _, g, w in found if w.why is None]
    within_ss = float(sum(g["ss"].sum() for g in ok_cells))
    within_dof = int(sum((g["n"] - 1).sum() for g in ok_cells))
    noise = (pooled_noise(accepted, within_ss, within_dof) if accepted
             else Noise(float("nan"), 0, "none"))
    t = float(stats.t.ppf(0.5 + level / 2, noise.dof)) if noise.dof > 0 else float("nan")
    rows = []
    for key, g, w in found:
        u, y = g["u"].to_numpy(), g["loss"].to_numpy()
        row = dict(zip(x, (float(k) for k in key)))
        row.update(n_cells=g.height, n_runs=int(g["n"].sum()),
                   best_hp=float(np.exp(u[int(np.argmin(y))])), why=w.why)
        if w.why is None:
            us, se = w.u_star, float(np.sqrt(noise.sigma2 * w.var_unit()))
            q0, q1, q2 = (float(v) for v in w.q)
            row.update(hp_opt=float(np.exp(us)), u_opt=us, se_u=se,
                       hp_lo=float(np.exp(us - t * se)), hp_hi=float(np.exp(us + t * se)),
                       loss_opt=q0 - q1 * q1 / (4 * q2), q0=q0, q1=q1, q2=q2,
                       hp_window_lo=float(np.exp(w.u_lo)), hp_window_hi=float(np.exp(w.u_hi)))
        rows.append(row)
    cols = [*x, "n_cells", "n_runs", "best_hp", "hp_opt", "u_opt", "se_u", "hp_lo", "hp_hi",
            "loss_opt", "q0", "q1", "q2", "hp_window_lo", "hp_window_hi", "why"]
    schema = {c: pl.Float64 for c in cols}
    schema.update(n_cells=pl.Int64, n_runs=pl.Int64, why=pl.String)
    table = pl.DataFrame([{c: r.get(c) for c in cols} for r in rows], schema=schema,
                         orient="row")
    return table, noise
