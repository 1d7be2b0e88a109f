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
   with M = (XᵀWX)⁻¹ (the window's unscaled covariance);
5. the optimum stays inside the data (on a published lr x batch study one group's
   quadratic bottomed out at 1.48 nats where every observed loss was above 2.1, SE 0.0004
   in ln lr, a diverged run beside the best bending it). A bottom more than
   ``depth_allowance`` below the best cell (q2_typ · h² + ``DEPTH_Z`` σ: a valley of the
   study's median curvature q2_typ has its bottom within one grid step h of the best cell)
   or a 5-cell window whose residual variance fails an F-test against σ (``MISFIT_P``) is
   refitted on 3 cells (``narrowed``); still too deep, the optimum is clipped to the best
   cell ± half a step and its SE is at least that span / sqrt(12) (a uniform over it: the
   grid's resolution), ``flag`` says so; a misfit that cannot be refitted takes its own
   residual variance. σ here is a median over the windows (``robust_sigma2``), so the
   windows it judges cannot inflate it.

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

__all__ = ["DEPTH_Z", "HALF_WINDOW", "MISFIT_P", "Noise", "Window", "depth_allowance",
           "fit_window", "locate_optima", "narrowed", "pooled_noise", "robust_sigma2",
           "typical_curvature"]

HALF_WINDOW = 2
"""Cells on each side of the best one in the quadratic's window (at most)."""
DEPTH_Z = 3.0
"""Noise SDs a quadratic's bottom may lie below the best cell beyond the grid's own share."""
MISFIT_P = 0.001
"""A window whose residual variance exceeds the pooled noise at this F-test level uses its
own (local misfit: an asymmetric valley, a diverged run in the window)."""


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
    y_best: float = float("nan")
    """The best cell's loss (the lowest observed)."""
    u_best: float = float("nan")
    h_lo: float = float("nan")
    h_hi: float = float("nan")
    """The grid's steps below and above the best cell (ln hp)."""

    @property
    def bottom(self) -> float:
        """The quadratic's minimum loss q0 - q1² / (4 q2)."""
        q0, q1, q2 = self.q
        return float(q0 - q1 * q1 / (4.0 * q2))

    @property
    def drop(self) -> float:
        """How far the quadratic's bottom lies below the best observed loss (>= 0 but for
        noise)."""
        return float(self.y_best - self.bottom)

    def resolution(self) -> tuple[float, float]:
        """(lo, hi): the best cell ± half a grid step each side: where the optimum of a
        valley sampled on this grid lies, whatever its shape."""
        return self.u_best - self.h_lo / 2, self.u_best + self.h_hi / 2

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


def fit_window(u: np.ndarray, loss: np.ndarray, n: np.ndarray, hp: str,
               half_window: int = HALF_WINDOW) -> Window:
    """The quadratic around the best of a group's cells: ``u`` [m] sorted ln hp, ``loss`` [m]
    cell means, ``n`` [m] runs per cell; at most ``half_window`` cells each side of the best.
    Refusals come back in ``why``, never raised."""
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
    half = min(half_window, best, m - 1 - best)
    sl = slice(best - half, best + half + 1)
    uw, yw, nw = u[sl], loss[sl], n[sl].astype(float)
    X = np.stack([np.ones_like(uw), uw, uw * uw], axis=1)  # [w, 3]
    XtW = X.T * nw  # [3, w]
    M = np.linalg.inv(XtW @ X)
    q = M @ (XtW @ yw)
    r = yw - X @ q
    rss = float(np.sum(nw * r * r))
    lo, hi = float(uw[0]), float(uw[-1])
    at = dict(y_best=float(loss[best]), u_best=float(u[best]), h_lo=float(u[best] - u[best - 1]),
              h_hi=float(u[best + 1] - u[best]))
    if not q[2] > 0:
        return Window(q, M, rss, len(uw) - 3, lo, hi, **at,
                      why=f"no valley: the quadratic in log {hp} opens downward (q2 = {q[2]:.3g})")
    w = Window(q, M, rss, len(uw) - 3, lo, hi, **at)
    if not lo <= w.u_star <= hi:
        return Window(q, M, rss, len(uw) - 3, lo, hi, **at,
                      why=f"the quadratic's minimum {np.exp(w.u_star):.4g} lies outside the "
                          f"fitted {hp} range [{np.exp(lo):.4g}, {np.exp(hi):.4g}]")
    return w


def typical_curvature(windows: list[Window]) -> float:
    """The median q2 of the accepted windows (loss per ln-hp unit²; NaN with none): a
    diverged run in one window makes its q2 huge, the median of the others stays put."""
    q2 = [float(w.q[2]) for w in windows if w.why is None]
    return float(np.median(q2)) if q2 else float("nan")


def depth_allowance(w: Window, q2_typical: float, sigma: float = 0.0, n_best: float = 1.0) -> float:
    """How far below the best observed loss a quadratic's bottom may honestly lie: a valley
    of the typical curvature has its bottom within a grid step h of the best cell, so at most
    q2 · h² below it (h the larger step beside the best), plus ``DEPTH_Z`` noise SDs of the
    best cell's mean (``sigma`` per run, ``n_best`` runs). A deeper bottom is the quadratic's,
    not the data's (a diverged run beside the best one)."""
    h = max(w.h_lo, w.h_hi)
    q2 = q2_typical if np.isfinite(q2_typical) else float(w.q[2])
    return float(q2 * h * h + DEPTH_Z * sigma / np.sqrt(max(n_best, 1.0)))


def narrowed(w: Window, u: np.ndarray, loss: np.ndarray, n: np.ndarray, hp: str,
             q2_typical: float, sigma2: float, sigma2_dof: int = 10_000) -> tuple[Window, str | None]:
    """(the window to use, None or why it cannot be trusted as it is: 'deep', 'misfit').

    A 5-cell window whose bottom lies too far below the best cell (``depth_allowance``) or
    whose residual variance is far above the noise ``sigma2`` (estimated with ``sigma2_dof``
    dof; F-test at ``MISFIT_P``): a diverged run two cells away bends it, so it is refitted
    on the best cell and its two neighbours. Still too deep: 'deep' (locate it to the grid's
    resolution); not refittable: 'misfit' (its own residual variance sets its SE)."""
    sigma = float(np.sqrt(sigma2)) if np.isfinite(sigma2) and sigma2 > 0 else 0.0
    n_best = float(n[int(np.argmin(loss))])

    def deep(v: Window) -> bool:
        return v.drop > depth_allowance(v, q2_typical, sigma, n_best)

    if w.why is not None:
        return w, None
    crit = float(stats.f.ppf(1 - MISFIT_P, w.dof, max(sigma2_dof, 1))) if w.dof > 0 else np.inf
    misfit = sigma > 0 and w.dof > 0 and w.rss / w.dof > crit * sigma2
    if not (deep(w) or misfit):
        return w, None
    if w.dof > 0:
        w3 = fit_window(u, loss, n, hp, half_window=1)
        if w3.why is None:
            return (w3, "deep") if deep(w3) else (w3, None)
    return w, "deep" if deep(w) else "misfit"


def robust_sigma2(windows: list[Window]) -> tuple[float, int]:
    """σ² from the windows' own residual variances s_i² = rss_i / dof_i (dof_i > 0), robust
    to a few windows whose quadratic misfits (a diverged run inside): the median of
    s_i² / m_i, m_i the median of χ²(dof_i) / dof_i (1 for a correct σ²); and the windows'
    total dof. (NaN, 0) without a window of dof > 0."""
    used = [w for w in windows if w.why is None and w.dof > 0]
    r = [w.rss / w.dof / (stats.chi2.median(w.dof) / w.dof) for w in used]
    return (float(np.median(r)), sum(w.dof for w in used)) if r else (float("nan"), 0)


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
    hp_window_lo, hp_window_hi, why (None: accepted), flag (None, or why an accepted
    optimum was located to the grid's resolution or its SE taken from its own misfit)."""
    groups = cells.sort([*x, "u"]).partition_by(list(x), maintain_order=True, as_dict=True)
    found = []
    for key, g in groups.items():
        u, y, n = (g[c].to_numpy().astype(float) for c in ("u", "loss", "n"))
        found.append((key, g, fit_window(u, y, n, hp)))
    ok = [(g, w) for _, g, w in found if w.why is None]
    noise = _noise(ok)
    # first pass: a σ² that a few misfitting windows cannot inflate, to judge them by
    s0, s0_dof = robust_sigma2([w for _, w in ok])
    if not np.isfinite(s0) or (noise.source == "seed replicates" and noise.sigma2 > s0):
        s0, s0_dof = noise.sigma2, noise.dof
    q2_typ = typical_curvature([w for _, w in ok])
    sigma0 = float(np.sqrt(s0)) if np.isfinite(s0) and s0 > 0 else 0.0
    s0 = sigma0 * sigma0
    deep, misfit = set(), set()
    for i, (key, g, w) in enumerate(found):
        u, y, n = (g[c].to_numpy().astype(float) for c in ("u", "loss", "n"))
        w2, status = narrowed(w, u, y, n, hp, q2_typ, s0, s0_dof)
        found[i] = (key, g, w2)
        if status:
            (deep if status == "deep" else misfit).add(id(w2))
    ok = [(g, w) for _, g, w in found if w.why is None]
    flagged = deep | misfit
    try:  # the noise of the windows now used, but the flagged ones
        noise = _noise([(g, w) for g, w in ok if id(w) not in flagged] or ok)
    except AnalysisInputError:
        noise = _noise(ok)
    t = float(stats.t.ppf(0.5 + level / 2, noise.dof)) if noise.dof > 0 else float("nan")
    rows = []
    for key, g, w in found:
        u, y = g["u"].to_numpy(), g["loss"].to_numpy()
        row = dict(zip(x, (float(k) for k in key)))
        row.update(n_cells=g.height, n_runs=int(g["n"].sum()),
                   best_hp=float(np.exp(u[int(np.argmin(y))])), why=w.why, flag=None)
        if w.why is None:
            sigma2 = noise.sigma2
            if id(w) in misfit:
                sigma2 = max(sigma2, w.rss / w.dof)
                row["flag"] = (f"local misfit: the quadratic's residual sd {np.sqrt(sigma2):.3g} "
                               f"is above the pooled {np.sqrt(noise.sigma2):.3g}; its own used")
            us, se = w.u_star, float(np.sqrt(sigma2 * w.var_unit()))
            q0, q1, q2 = (float(v) for v in w.q)
            loss_opt = w.bottom
            if id(w) in deep:
                lo, hi = w.resolution()
                row["flag"] = (f"too deep: the quadratic's bottom {w.bottom:.4g} is {w.drop:.3g} "
                               f"below the best run's loss {w.y_best:.4g} (allowed "
                               f"{depth_allowance(w, q2_typ, sigma0, _n_best(g, w)):.3g}); located "
                               "to the grid's resolution instead")
                us = float(np.clip(us, lo, hi))
                se = max(se, (hi - lo) / np.sqrt(12.0))
                loss_opt = w.y_best
            row.update(hp_opt=float(np.exp(us)), u_opt=us, se_u=se,
                       hp_lo=float(np.exp(us - t * se)), hp_hi=float(np.exp(us + t * se)),
                       loss_opt=loss_opt, q0=q0, q1=q1, q2=q2,
                       hp_window_lo=float(np.exp(w.u_lo)), hp_window_hi=float(np.exp(w.u_hi)))
        rows.append(row)
    cols = [*x, "n_cells", "n_runs", "best_hp", "hp_opt", "u_opt", "se_u", "hp_lo", "hp_hi",
            "loss_opt", "q0", "q1", "q2", "hp_window_lo", "hp_window_hi", "why", "flag"]
    schema = {c: pl.Float64 for c in cols}
    schema.update(n_cells=pl.Int64, n_runs=pl.Int64, why=pl.String, flag=pl.String)
    table = pl.DataFrame([{c: r.get(c) for c in cols} for r in rows], schema=schema,
                         orient="row")
    return table, noise


def _n_best(g: pl.DataFrame, w: Window) -> float:
    """Runs in the group's best cell."""
    return float(g["n"][int(np.argmin(g["loss"].to_numpy()))])


def _noise(ok: list[tuple[pl.DataFrame, Window]]) -> Noise:
    """The pooled noise of the accepted windows and their groups' replicates."""
    if not ok:
        return Noise(float("nan"), 0, "none")
    within_ss = float(sum(g["ss"].sum() for g, _ in ok))
    within_dof = int(sum((g["n"] - 1).sum() for g, _ in ok))
    return pooled_noise([w for _, w in ok], within_ss, within_dof)
