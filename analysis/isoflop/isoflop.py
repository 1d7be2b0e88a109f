"""IsoFLOP profiles, "approach 2" of Hoffmann et al. 2022 (arXiv 2203.15556, sec. 3.2):
per compute budget, the loss-minimising model size from a parabola; then power laws
N_opt ∝ C^a and D_opt ∝ C^b. Porian et al. 2024 (arXiv 2406.19146) and the Llama 3
report (arXiv 2407.21783, sec. 3.2.1) fit the same way.

Procedure of ``fit_isoflops``:

1. Points are grouped by compute budget (``analysis.isoflop.budgets``: C = 6 N D unless
   the table has a compute column; nearly equal C are one budget).
2. Per budget, a least-squares parabola of the loss (``log_loss=True``: of ln loss) in
   ln N, and the guards that exclude a budget with its reason: too few points,
   non-convex, off-centre, one-sided (``analysis.isoflop.parabola``).
3. D_opt = C / (k N_opt) per budget, k = C / (N D) of its points (k = 6 for C = 6 N D,
   so b = 1 - a exactly).
4. Over the kept budgets, least squares in log-log: ln N_opt = ln G_N + a ln C and
   ln D_opt = ln G_D + b ln C (Hoffmann et al. sec. 3.2; their Table 2 reports a and b).
5. Bootstrap over points: ``n_boot`` seeded resamples, each drawing every budget's points
   with replacement (a budget's resamples all at once, batched numpy), refitting the
   parabolas and both power laws. A resampled budget whose parabola is not convex or
   whose vertex leaves the budget's sampled N range sits that resample out. Percentile
   intervals at ``level`` for a and b, their SEs the resamples' standard deviations.
   Per-budget SEs of N_opt, D_opt and L_opt: half the central 68.27% interval of the
   budget's usable resamples (robust to a few degenerate ones; NaN for a budget of 3
   points, which its parabola interpolates: its resamples carry no spread).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.fit.bootstrap import check_resamples
from analysis.errors import AnalysisInputError
from analysis.isoflop.budgets import Budgets, group_budgets, read_points
from analysis.isoflop.parabola import BudgetFit, bootstrap_vertices, fit_budget

__all__ = ["IsoFlopFit", "fit_isoflops"]


@dataclass(frozen=True, eq=False)
class IsoFlopFit:
    """An approach-2 fit: N_opt = n_coef C^a, D_opt = d_coef C^b over the kept budgets.

    ``optima``: one row per budget, by compute: budget (index), C, n_points, N_opt,
    N_opt_se, D_opt, D_opt_se, loss_opt, loss_opt_se, curvature (kappa, loss per (ln N)²;
    of ln loss when ``log_loss``), kept, reason ("" when kept). N_opt is NaN for a budget
    without a minimum (too few points, non-convex); SEs are NaN without a bootstrap.
    ``points``: the fitted table's C, N, D, loss and budget (row of ``optima``, -1: none).
    ``boot``: (resamples, 4) of a, ln n_coef, b, ln d_coef, one row per usable resample.
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


def _power_law(log_c: np.ndarray, log_y: np.ndarray, w: np.ndarray):
    """Least squares ln y = c + s ln C in each row of ``log_y`` (B, K) over the budgets
    where ``w`` (B, K) is 1 (a NaN elsewhere is ignored): (s, c), each (B,)."""
    log_y = np.where(w > 0, log_y, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sw = w.sum(axis=1)
        mc = (w * log_c).sum(axis=1) / sw
        my = (w * log_y).sum(axis=1) / sw
        dc = log_c - mc[:, None]
        slope = (w * dc * (log_y - my[:, None])).sum(axis=1) / (w * dc * dc).sum(axis=1)
    return slope, my - slope * mc


def _fits(g: Budgets, **kw) -> list[BudgetFit]:
    """Each budget's parabola and verdict (``fit_budget``)."""
    return [fit_budget(g.N[g.label == j], g.loss[g.label == j], **kw) for j in range(g.k.size)]


def _bootstrap(g: Budgets, fits: list[BudgetFit], n_boot: int, seed: int, log_loss: bool):
    """(n_boot, K) resampled ln N_opt and loss_opt per budget; NaN where unusable (and
    throughout for a budget without a minimum)."""
    rng = np.random.default_rng(seed)
    vx = np.full((n_boot, len(fits)), np.nan)
    vy = np.full((n_boot, len(fits)), np.nan)
    for j, f in enumerate(fits):
        if np.isfinite(f.log_n_opt):
            m = g.label == j
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


def _weak_budgets(vx: np.ndarray, keep: np.ndarray, C_budget: np.ndarray) -> list[str]:
    """A note per kept budget without a usable vertex in over 5% of the resamples."""
    lost = 1 - np.isfinite(vx).mean(axis=0)
    return [
        f"budget C = {C_budget[j]:.3g}: no usable vertex in {100 * lost[j]:.0f}% of the "
        "bootstrap resamples (non-convex or off-centre there): its optimum is weakly pinned"
        for j in np.flatnonzero(keep & (lost > 0.05))
    ]


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


def fit_isoflops(
    data: pl.DataFrame,
    *,
    compute: str = "C",
    N: str = "N",
    D: str = "D",
    loss: str = "loss",
    budgets: Sequence[float] | None = None,
    rtol: float = 0.05,
    min_points: int = 3,
    min_side: int = 2,
    log_loss: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> IsoFlopFit:
    """Approach 2 of Hoffmann et al. 2022 on ``data`` (one row per training run); the
    procedure is in the module docstring. ``budgets``/``rtol``: how points are grouped by
    compute (``analysis.isoflop.budgets``); ``min_points``/``min_side``: the guards
    (``analysis.isoflop.parabola``). Raises AnalysisInputError on a missing column, a
    missing, non-finite or non-positive value, or fewer than 2 usable budgets."""
    _check_options(min_points, min_side, n_boot, level)
    C, n_arr, d_arr, l_arr = read_points(data, compute=compute, N=N, D=D, loss=loss)
    g = group_budgets(C, n_arr, d_arr, l_arr, budgets=budgets, rtol=rtol)
    fits = _fits(g, log_loss=log_loss, min_points=min_points, min_side=min_side)
    _refuse_unusable(fits)
    keep = np.array([not f.reason for f in fits])
    log_c = np.log(g.C_budget)
    log_n = np.array([f.log_n_opt for f in fits])
    log_d = log_c - np.log(g.k) - log_n  # D_opt = C / (k N_opt)
    w = keep[None, :].astype(float)
    a, ln_gn = (float(v[0]) for v in _power_law(log_c, log_n[None], w))
    b, ln_gd = (float(v[0]) for v in _power_law(log_c, log_d[None], w))

    boot = np.zeros((0, 4))
    se = np.full((3, len(fits)), np.nan)
    notes = list(g.notes)
    if n_boot:
        vx, vy = _bootstrap(g, fits, n_boot, seed, log_loss)
        vd = log_c - np.log(g.k) - vx
        wb = (keep[None, :] & np.isfinite(vx)).astype(float)
        sa, ca = _power_law(log_c, vx, wb)
        sb, cb = _power_law(log_c, vd, wb)
        boot = np.stack([sa, ca, sb, cb], axis=1)[wb.sum(axis=1) >= 2]
        se = np.stack([_se(np.exp(vx)), _se(np.exp(vd)), _se(vy)])
        se[:, np.array([f.n_points for f in fits]) <= 3] = np.nan  # interpolated: no spread
        notes += _weak_budgets(vx, keep, g.C_budget)
        if boot.shape[0] < n_boot:
            notes.append(f"{n_boot - boot.shape[0]} resample(s) had < 2 usable budgets")
    if boot.shape[0] >= 2:
        a_ci = tuple(float(v) for v in np.percentile(boot[:, 0], _percentiles(level)))
        b_ci = tuple(float(v) for v in np.percentile(boot[:, 2], _percentiles(level)))
        a_se, b_se = float(np.std(boot[:, 0], ddof=1)), float(np.std(boot[:, 2], ddof=1))
    else:
        a_ci = b_ci = (float("nan"), float("nan"))
        a_se = b_se = float("nan")

    optima = pl.DataFrame(
        {
            "budget": np.arange(len(fits)),
            "C": g.C_budget,
            "n_points": [f.n_points for f in fits],
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
    points = pl.DataFrame({"C": C, "N": n_arr, "D": d_arr, "loss": l_arr, "budget": g.label})
    return IsoFlopFit(
        a=a, b=b, a_ci=a_ci, b_ci=b_ci, a_se=a_se, b_se=b_se,
        n_coef=float(np.exp(ln_gn)), d_coef=float(np.exp(ln_gd)),
        optima=optima, points=points, boot=boot, level=level, n_boot=n_boot,
        log_loss=log_loss, notes=tuple(notes),
    )  # fmt: skip
