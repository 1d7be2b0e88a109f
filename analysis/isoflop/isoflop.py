"""IsoFLOP profiles, "approach 2" of Hoffmann et al. 2022 (arXiv 2203.15556, sec. 3.2):
per compute budget, the loss-minimising model size from a parabola; then power laws
N_opt ∝ C^a and D_opt ∝ C^b. Porian et al. 2024 (arXiv 2406.19146) and the Llama 3
report (arXiv 2407.21783, sec. 3.2.1) fit the same way.

Procedure of ``fit_isoflops``:

1. Points are grouped by compute budget (``analysis.isoflop.budgets``: C = 6 N D unless
   the table has a compute column; nearly equal C are one budget).
2. Per budget, only the runs with N within a factor ``window`` (default 8) of its
   lowest-loss N (``analysis.isoflop.window``), then a least-squares parabola of the loss
   (``log_loss=True``: of ln loss) in ln N, or with ``method="interp"`` the argmin of a
   smoothing spline (``analysis.isoflop.interp``, Porian et al. 2024), and the guards
   that exclude a budget with its reason: too few points,
   non-convex, off-centre, one-sided (``analysis.isoflop.parabola``).
3. D_opt = C / (k N_opt) per budget, k = C / (N D) of its points (k = 6 for C = 6 N D,
   so b = 1 - a exactly).
4. Over the kept budgets, least squares in log-log: ln N_opt = ln G_N + a ln C and
   ln D_opt = ln G_D + b ln C (Hoffmann et al. sec. 3.2; their Table 2 reports a and b).
   ``joint=True`` (parabola only): instead one least-squares fit of every kept budget's
   windowed points with its parabola's vertex on the line (``analysis.isoflop.joint``);
   not the default: on the realistic study it lowers the median error but not the tail,
   and it moves a on Epoch's points from 0.494 to 0.517 (docs/isoflop.md).
5. Bootstrap over points: ``n_boot`` seeded resamples, each drawing every budget's points
   with replacement (a budget's resamples all at once, batched numpy), refitting the
   parabolas and both power laws. A resampled budget whose parabola is not convex or
   whose vertex leaves the budget's sampled N range sits that resample out. Percentile
   intervals at ``level`` for a and b, their SEs the resamples' standard deviations.
   Per-budget SEs of N_opt, D_opt and L_opt: half the central 68.27% interval of the
   budget's usable resamples (robust to a few degenerate ones; NaN for a budget of 3
   points, which its parabola interpolates: its resamples carry no spread). The
   resampled points are each budget's windowed ones; with ``method="interp"`` the
   parabola's resamples are used, shifted to centre on the spline's estimate.
6. Model error (``robust=True``, ``analysis.isoflop.robust``): the whole fit is redone at
   windows w/2, w, 2w with both methods; the spread of those 6 estimates of a (b, ln of
   the coefficients) about the main one is added in quadrature to each side of the
   bootstrap interval. ``a_ci_boot`` keeps the bootstrap's interval alone.
7. Fewer than 3 kept budgets: a one-line ``warnings`` entry (a line through 2 points). So
   is an exponent the fit does not pin (``IMPRECISE``): a 95% CI wider than ±25% of a, or
   one reaching a <= 0 or a >= 1 (where N_opt or D_opt would not grow with compute). At
   ±25% the ends of the interval are a factor 1.67 apart, more than Kaplan et al. 2020's
   0.73 (arXiv 2001.08361) and Hoffmann et al.'s 0.49 are (1.49): such a number does not
   tell those answers apart, and the warning says so (the number and its interval are
   still printed). On the realistic study's 1,200 sweeps with 8-12 budgets
   the one fit off by 49% (3 of 9 budgets kept, a = 0.175, CI -0.068 to 0.347) had no
   warning before.
8. A kept budget whose resampled parabola has no usable vertex (non-convex, or outside
   the sampled N) in ``LOST_SHARE`` = 20% or more of the bootstrap resamples: a
   one-line ``warnings`` entry naming it (5-20%: a note). Its vertex is weakly pinned:
   a fifth of plausible redraws of its runs have no minimum inside the grid.
   It stays in the fit, with the warning, rather than leaving it, because (a) leaving
   it did not make the exponent more accurate on the realistic synthetic study
   (``bench/isoflop_study.py``, 240 sweeps, window 8: median |a error| 1.03% kept,
   1.04% with such budgets dropped, 1.11% dropped from 10%; worst 13.1% kept, 16.5%
   dropped; sweeps beyond 4% off: 20 kept, 21 dropped; docs/isoflop.md): a weak vertex
   is noisy but not biased, and dropping it also drops a budget of the line;
   and (b) the point estimate would otherwise depend on the bootstrap's seed and size
   (``n_boot=0`` would give another a). The warning says to add runs around that
   budget's minimum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.bootstrap import check_resamples
from analysis.isoflop.budgets import DERIVED_RTOL, Budgets, group_budgets, read_points
from analysis.isoflop.estimate import METHODS, Estimate, estimate, power_law
from analysis.isoflop.parabola import BudgetFit, bootstrap_vertices
from analysis.isoflop.robust import choices, widen
from analysis.isoflop.window import DEFAULT_WINDOW

__all__ = ["IMPRECISE", "LOST_SHARE", "IsoFlopFit", "fit_isoflops"]


@dataclass(frozen=True, eq=False)
class IsoFlopFit:
    """An approach-2 fit: N_opt = n_coef C^a, D_opt = d_coef C^b over the kept budgets.

    ``optima``: one row per budget, by compute: budget (index), C, n_points, n_used (the
    points inside its window), N_opt,
    N_opt_se, D_opt, D_opt_se, loss_opt, loss_opt_se, curvature (kappa, loss per (ln N)²;
    of ln loss when ``log_loss``), kept, reason ("" when kept). N_opt is NaN for a budget
    without a minimum (too few points, non-convex); SEs are NaN without a bootstrap.
    ``points``: the fitted table's C, N, D, loss and budget (row of ``optima``, -1: none).
    ``boot``: (resamples, 4) of a, ln n_coef, b, ln d_coef, one row per usable resample.
    ``a_ci``/``b_ci``/``n_coef_ci``/``d_coef_ci``: the bootstrap interval widened by the
    window/method refits (``analysis.isoflop.robust``); ``a_ci_boot``/``b_ci_boot``: the
    bootstrap's alone. ``alternatives``: the refits (window, method, kept, a, b, ln_n_coef,
    ln_d_coef), None with ``robust=False``. ``warnings``: one line each (e.g. < 3 budgets).
    """

    a: float
    b: float
    a_ci: tuple[float, float]
    b_ci: tuple[float, float]
    a_se: float
    b_se: float
    n_coef: float
    d_coef: float
    optima: pl.DataFrame
    points: pl.DataFrame
    boot: np.ndarray
    level: float
    n_boot: int
    log_loss: bool
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    window: float | None = DEFAULT_WINDOW
    method: str = "parabola"
    joint: bool = False
    a_ci_boot: tuple[float, float] = (float("nan"), float("nan"))
    b_ci_boot: tuple[float, float] = (float("nan"), float("nan"))
    n_coef_ci: tuple[float, float] = (float("nan"), float("nan"))
    d_coef_ci: tuple[float, float] = (float("nan"), float("nan"))
    alternatives: pl.DataFrame | None = None

    @property
    def kept(self) -> pl.DataFrame:
        """The rows of ``optima`` the power laws were fitted to."""
        return self.optima.filter(pl.col("kept"))

    def n_opt(self, C) -> np.ndarray:
        """Compute-optimal parameters N_opt(C) = n_coef C^a."""
        return self.n_coef * np.asarray(C, dtype=float) ** self.a

    def d_opt(self, C) -> np.ndarray:
        """Compute-optimal tokens D_opt(C) = d_coef C^b."""
        return self.d_coef * np.asarray(C, dtype=float) ** self.b

    def band(self, C, which: str = "N") -> tuple[np.ndarray, np.ndarray]:
        """Pointwise percentile band (at ``level``) of N_opt(C) or D_opt(C) over the
        bootstrap; NaN without one."""
        if which not in ("N", "D"):
            raise AnalysisInputError(f"band: which must be 'N' or 'D', got {which!r}")
        lc = np.log(np.asarray(C, dtype=float))
        if self.boot.shape[0] < 2:
            nan = np.full(lc.shape, np.nan)
            return nan, nan
        j = 0 if which == "N" else 2
        curves = np.exp(self.boot[:, j + 1, None] + self.boot[:, j, None] * lc.reshape(1, -1))
        lo, hi = np.percentile(curves, _percentiles(self.level), axis=0)
        return lo.reshape(lc.shape), hi.reshape(lc.shape)

    def summary(self) -> str:
        """``approach 2 over 9 of 12 budgets: a = 0.49 (95% CI ..), b = ..`` (no CI
        without a bootstrap)."""
        pct = f"{100 * self.level:g}%"
        parts = []
        for name, v, (lo, hi) in (("a", self.a, self.a_ci), ("b", self.b, self.b_ci)):
            ci = f" ({pct} CI {lo:.4f}, {hi:.4f})" if np.isfinite(lo) else ""
            parts.append(f"{name} = {v:.4f}{ci}")
        head = f"approach 2 over {self.kept.height} of {self.optima.height} budgets"
        return f"{head}: {', '.join(parts)}"


def _percentiles(level: float) -> np.ndarray:
    return 100 * np.array([(1 - level) / 2, (1 + level) / 2])


def _bootstrap(g: Budgets, est: Estimate, n_boot: int, seed: int, log_loss: bool):
    """(n_boot, K) resampled ln N_opt and loss_opt per budget from the parabolas of the
    points in each budget's window (``est.used``); NaN where unusable (and throughout for
    a budget without a minimum)."""
    fits = est.fits
    rng = np.random.default_rng(seed)
    vx = np.full((n_boot, len(fits)), np.nan)
    vy = np.full((n_boot, len(fits)), np.nan)
    for j, f in enumerate(fits):
        if np.isfinite(f.log_n_opt):
            m = (g.label == j) & est.used
            vx[:, j], vy[:, j] = bootstrap_vertices(
                g.N[m], g.loss[m], rng, n_boot, log_loss=log_loss
            )
    return vx, vy


def _se(values: np.ndarray) -> np.ndarray:
    """Per column, the bootstrap SE as half the central 68.27% interval of the finite
    entries (the SD for a normal distribution; a few wild resamples of a small budget,
    e.g. 3 distinct N of which 2 nearly equal, cannot inflate it); NaN under 2 entries."""
    out = np.full(values.shape[1], np.nan)
    for j in range(values.shape[1]):
        v = values[:, j][np.isfinite(values[:, j])]
        if v.size >= 2:
            lo, hi = np.percentile(v, [15.865, 84.135])
            out[j] = (hi - lo) / 2
    return out


LOST_SHARE = 0.2
"""A kept budget without a usable vertex in this share of the bootstrap resamples or more
is a line in ``warnings`` (step 8 of the module docstring); above 5%, a note."""


def _weak_budgets(
    vx: np.ndarray, keep: np.ndarray, C_budget: np.ndarray
) -> tuple[list[str], list[str]]:
    """(notes, warnings): a line per kept budget without a usable vertex in over 5% of
    the resamples, a warning from ``LOST_SHARE`` on."""
    lost = 1 - np.isfinite(vx).mean(axis=0)
    notes, warns = [], []
    for j in np.flatnonzero(keep & (lost > 0.05)):
        line = (f"budget C = {C_budget[j]:.3g}: no usable vertex in {100 * lost[j]:.0f}% of "
                "the bootstrap resamples (non-convex or off-centre there): its optimum is "
                "weakly pinned")  # fmt: skip
        if lost[j] >= LOST_SHARE:
            warns.append(f"{line}; kept in the fit, add runs around its minimum")
        else:
            notes.append(line)
    return notes, warns


def _check_options(min_points: int, min_side: int, n_boot: int, level: float) -> None:
    if min_points < 3:
        raise AnalysisInputError(f"isoFLOP fit: min_points must be >= 3, got {min_points}")
    if min_side < 1:
        raise AnalysisInputError(f"isoFLOP fit: min_side must be >= 1, got {min_side}")
    if n_boot < 0 or n_boot == 1:
        raise AnalysisInputError(f"isoFLOP fit: n_boot must be 0 or >= 2, got {n_boot}")
    check_resamples(n_boot, what="isoFLOP fit")
    if not 0 < level < 1:
        raise AnalysisInputError(f"isoFLOP fit: level must be in (0, 1), got {level}")


def _refuse_unusable(fits: list[BudgetFit]) -> None:
    """Fewer than 2 kept budgets: one line with the count of each exclusion reason."""
    kept = sum(1 for f in fits if not f.reason)
    if kept >= 2:
        return
    kinds: dict[str, int] = {}
    for f in fits:
        if f.reason:
            kind = f.reason.split(":")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    why = "; excluded: " + ", ".join(f"{n} {k}" for k, n in kinds.items()) if kinds else ""
    raise AnalysisInputError(
        f"isoFLOP fit: {kept} usable budget(s) of {len(fits)} (need >= 2){why}"
    )


def _ci(values: np.ndarray, level: float) -> tuple[float, float]:
    return tuple(float(v) for v in np.percentile(values, _percentiles(level)))


IMPRECISE = 0.25
"""The widest 95% CI half-width of a, relative to a, that passes without a warning (step 7
of the module docstring)."""


def _warnings(kept: int, total: int, a: float, a_ci: tuple[float, float], level: float) -> tuple[str, ...]:
    out = []
    if kept < 3:
        out.append(f"only {kept} budget(s) kept of {total}: a power law through {kept} optima has no "
                   "check of its fit, so a rests on the 2 vertices alone; add budgets")
    lo, hi = a_ci
    if np.isfinite(lo) and np.isfinite(hi):
        half = (hi - lo) / 2 / abs(a) if a else np.inf
        if lo <= 0 or hi >= 1 or half > IMPRECISE:
            out.append(f"a is not pinned: its {100 * level:g}% CI ({lo:.3f}, {hi:.3f}) spans "
                       f"±{100 * half:.0f}% of a = {a:.3f}" + (" and leaves (0, 1)" if lo <= 0 or hi >= 1 else "")
                       + f" ({kept} of {total} budgets kept); add runs around each budget's "
                       "minimum, or budgets")
    return tuple(out)


def _alternatives(g: Budgets, window, opts: dict, done) -> pl.DataFrame:
    """The refits over ``robust.choices`` (reusing the ones in ``done``): one row each."""
    rows = []
    for w, m in choices(window):
        est = done.get((w, m)) or estimate(g, window=w, method=m, **opts)
        rows.append({"window": w, "method": m, "kept": int(est.keep.sum()), "a": est.a,
                     "b": est.b, "ln_n_coef": est.ln_gn, "ln_d_coef": est.ln_gd})  # fmt: skip
    return pl.DataFrame(rows, schema={"window": pl.Float64, "method": pl.String,
                                      "kept": pl.Int64, "a": pl.Float64, "b": pl.Float64,
                                      "ln_n_coef": pl.Float64, "ln_d_coef": pl.Float64},
                        nan_to_null=False)  # fmt: skip


def fit_isoflops(
    data: pl.DataFrame,
    *,
    compute: str = "C",
    N: str = "N",
    D: str = "D",
    loss: str = "loss",
    budgets: Sequence[float] | None = None,
    rtol: float | None = None,
    window: float | None = DEFAULT_WINDOW,
    method: str = "parabola",
    joint: bool = False,
    robust: bool = True,
    min_points: int = 3,
    min_side: int = 2,
    log_loss: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> IsoFlopFit:
    """Approach 2 of Hoffmann et al. 2022 on ``data`` (one row per training run); the
    procedure is in the module docstring.

    ``budgets``/``rtol``: how points are grouped by compute (``analysis.isoflop.budgets``;
    ``rtol=None``: 0.05 with a compute column, ``DERIVED_RTOL`` = 0.15 when C = 6 N D is
    derived). ``window``: each budget keeps its runs with N within a factor ``window`` of
    its lowest-loss N (``analysis.isoflop.window``; default 8, chosen on the realistic synthetic
    study in docs/isoflop.md; None: all runs, as Hoffmann et al.). ``method``: "parabola" (the
    vertex, Hoffmann et al.) or "interp" (a smoothing spline's argmin, Porian et al. 2024,
    arXiv 2406.19146). ``joint``: the power law as one joint fit of the parabolas with
    their vertices on it (``analysis.isoflop.joint``; the default two-stage fit otherwise).
    ``robust``: widen the CIs of a, b and the coefficients by the
    spread of the refits at windows w/2, w, 2w x both methods (``analysis.isoflop.robust``).
    ``min_points``/``min_side``: the guards (``analysis.isoflop.parabola``). Fewer than 3
    kept budgets: a line in ``warnings``. Raises AnalysisInputError on a missing column, a
    missing, non-finite or non-positive value, or fewer than 2 usable budgets. A kept
    budget that loses its vertex in ``LOST_SHARE`` (20%) of the resamples or more: a
    line in ``warnings`` (it stays in the fit; the module docstring says why)."""
    _check_options(min_points, min_side, n_boot, level)
    if method not in METHODS:
        raise AnalysisInputError(f"isoFLOP fit: method must be one of {METHODS}, got {method!r}")
    if window is not None and not (np.isfinite(window) and window > 1):
        raise AnalysisInputError(f"isoFLOP fit: window must be > 1 (a factor in N) or None, "
                                 f"got {window}")  # fmt: skip
    C, n_arr, d_arr, l_arr = read_points(data, compute=compute, N=N, D=D, loss=loss)
    derived = compute not in data.columns
    if rtol is None:
        rtol = DERIVED_RTOL if derived else 0.05
    g = group_budgets(C, n_arr, d_arr, l_arr, budgets=budgets, rtol=rtol)
    opts = {"log_loss": log_loss, "min_points": min_points, "min_side": min_side,
            "joint": joint}
    main = estimate(g, window=window, method=method, **opts)
    _refuse_unusable(main.fits)
    par = main if method == "parabola" else estimate(g, window=window, method="parabola", **opts)
    fits, keep = main.fits, main.keep
    log_c = np.log(g.C_budget)
    log_n = np.array([f.log_n_opt for f in fits])
    log_d = log_c - np.log(g.k) - log_n  # D_opt = C / (k N_opt)
    a, ln_gn, b, ln_gd = main.a, main.ln_gn, main.b, main.ln_gd

    boot = np.zeros((0, 4))
    weak: list[str] = []
    se = np.full((3, len(fits)), np.nan)
    notes = list(g.notes)
    if derived and budgets is None:
        notes.append(f"C = 6ND derived (no '{compute}' column): {C.size} runs grouped into "
                     f"{g.k.size} budget(s), neighbours within a factor {1 + rtol:g} in C")
    if n_boot and par.keep.sum() >= 2:
        vx, vy = _bootstrap(g, par, n_boot, seed, log_loss)
        vd = log_c - np.log(g.k) - vx
        wb = (par.keep[None, :] & np.isfinite(vx)).astype(float)
        sa, ca = power_law(log_c, vx, wb)
        sb, cb = power_law(log_c, vd, wb)
        boot = np.stack([sa, ca, sb, cb], axis=1)[wb.sum(axis=1) >= 2]
        # centred on this fit's estimate: the resampled lines are the two-stage ones
        # through the parabolas' vertices; the interp method and the joint fit borrow
        # their spread (the joint fit is the less noisy: a conservative interval)
        boot = boot + np.array([a, ln_gn, b, ln_gd]) - np.array(par.two_stage)
        se = np.stack([_se(np.exp(vx)), _se(np.exp(vd)), _se(vy)])
        se[:, np.array([f.n_points for f in par.fits]) <= 3] = np.nan  # interpolated: no spread
        weak_notes, weak = _weak_budgets(vx, keep, g.C_budget)
        notes += weak_notes
        if boot.shape[0] < n_boot:
            notes.append(f"{n_boot - boot.shape[0]} resample(s) had < 2 usable budgets")
    nan2 = (float("nan"), float("nan"))
    done = {(window, method): main, (window, "parabola"): par}
    alts = _alternatives(g, window, opts, done) if robust else None
    a_boot = b_boot = a_ci = b_ci = n_ci = d_ci = nan2
    a_se = b_se = float("nan")
    if boot.shape[0] >= 2:
        a_boot, b_boot = _ci(boot[:, 0], level), _ci(boot[:, 2], level)
        a_se, b_se = float(np.std(boot[:, 0], ddof=1)), float(np.std(boot[:, 2], ddof=1))
        a_ci, b_ci = a_boot, b_boot
        n_ci, d_ci = _ci(boot[:, 1], level), _ci(boot[:, 3], level)
        if alts is not None:
            a_ci = widen(a, a_boot, alts["a"].to_numpy())
            b_ci = widen(b, b_boot, alts["b"].to_numpy())
            n_ci = widen(ln_gn, n_ci, alts["ln_n_coef"].to_numpy())
            d_ci = widen(ln_gd, d_ci, alts["ln_d_coef"].to_numpy())
        n_ci, d_ci = tuple(float(np.exp(v)) for v in n_ci), tuple(float(np.exp(v)) for v in d_ci)

    optima = pl.DataFrame(
        {
            "budget": np.arange(len(fits)),
            "C": g.C_budget,
            "n_points": np.bincount(g.label[g.label >= 0], minlength=len(fits)),
            "n_used": [f.n_points for f in fits],
            "N_opt": np.exp(log_n),
            "N_opt_se": se[0],
            "D_opt": np.exp(log_d),
            "D_opt_se": se[1],
            "loss_opt": [f.loss_opt for f in fits],
            "loss_opt_se": se[2],
            "curvature": [f.curvature for f in fits],
            "kept": keep,
            "reason": [f.reason for f in fits],
        },
        nan_to_null=False,
    )
    points = pl.DataFrame({"C": C, "N": n_arr, "D": d_arr, "loss": l_arr, "budget": g.label,
                           "in_window": main.used})  # fmt: skip
    return IsoFlopFit(
        a=a, b=b, a_ci=a_ci, b_ci=b_ci, a_se=a_se, b_se=b_se,
        n_coef=float(np.exp(ln_gn)), d_coef=float(np.exp(ln_gd)),
        optima=optima, points=points, boot=boot, level=level, n_boot=n_boot,
        log_loss=log_loss, notes=tuple(notes),
        warnings=_warnings(int(keep.sum()), len(fits), a, a_ci, level) + tuple(weak),
        window=window, method=method, joint=joint, a_ci_boot=a_boot, b_ci_boot=b_boot,
        n_coef_ci=n_ci, d_coef_ci=d_ci, alternatives=alts,
    )  # fmt: skip
