"""Prediction intervals of a law of (N, D[, U]) refitted without its largest model sizes.

``holdout_largest_2d(data, law, k)`` is the extrapolation check of ``scalelab fit
--holdout-largest K`` for the two-variable laws (the one-variable A / x^B + E has its own:
``analysis.recipes.extrapolation``):

* ``chinchilla``: L = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, arXiv 2203.15556);
* ``data_constrained``: the same law at Muennighoff et al.'s effective N', D' (Muennighoff,
  Rush, Barak, Le Scao, Piktus, Tazi, Pyysalo, Wolf, Raffel 2023, arXiv 2305.16264), fitted in
  their two stages (``constrained.fit_data_constrained``: the base law on one-epoch runs with
  N <= N_opt(U), then R_D*, R_N* on every run with the base held fixed).

Every run at the k largest distinct N is held out; the law is refitted by least squares on
the loss itself (``loss="mse", space="linear"``: the estimator the interval is derived for;
``refit_2d``) and each held-out run gets a prediction interval for a new observation, the
linearised (delta-method) interval of Seber & Wild 1989, "Nonlinear Regression", §5.1:

    eps = y - L(theta):  theta_hat - theta ~= M eps   (M: p x n, the refit linearised),
    var(y0 - L_hat(x0)) = s^2 (|g0 M|^2 + 1),   g0 = dL/dtheta at x0 (internal coordinates),
    PI = L_hat(x0) -/+ t_{n - p, (1 + level)/2} sqrt(var).

For one stage (chinchilla) M = (J'J)^-1 J' and s^2 |g0 M|^2 = g0 Cov g0' with the usual
Gauss-Newton Cov = s^2 (J'J)^-1, s^2 = SSE / (n - 5). The two-stage fit is linearised stage
by stage (the delta method of a sequential estimator, Newey & McFadden 1994, "Large sample
estimation and hypothesis testing", Handbook of Econometrics 4, §6): stage 1 moves the base
parameters by M1 = (J1'J1)^-1 J1' P1 (P1 picks the stage-1 runs), stage 2 moves (R_D*, R_N*)
by M2 = (Jr'Jr)^-1 Jr' (I - Jb M1), so the base law's uncertainty reaches the saturation
constants and the prediction. Its s^2 is that of the law fitted in one stage (all 7
parameters from the two-stage optimum), SSE / (n - 7): the two-stage residuals carry the
base law's extrapolation error into the runs stage 1 did not see, and with s^2 from them
(SSE / tr((I - JM)'(I - JM))) the intervals covered 77-88% on the synthetic studies.

Not identified, said in words instead of a number (``Holdout2D.why``):

* a parameter at its box bound (``diagnostics.at_bounds``) that the held-out predictions
  depend on: moved a decade (x10 or /10; an exponent by +/-``EXPONENT_STEP``) it shifts some
  held-out prediction by more than s. One they do not depend on is held fixed;
* a flat valley: a stage's Jacobian, columns scaled to unit norm, with a condition number
  above ``MAX_CONDITION`` (the linearised variance along the valley is then a number the
  data do not support);
* a saturation constant R_D*, R_N* whose linearised 95% range (1.96 SE of log R*) spans more
  than a decade either way, the rule ``saturation_identified`` judges a flat profile by,
  while a decade moves a held-out prediction by more than s (the saturation is too curved
  over that range for a linear interval).

Coverage on synthetic studies with known truth (``analysis.synthetic.prediction_2d.coverage_2d``;
bench/extrapolation_coverage.py --2d, docs/extrapolation.md): 93-96% of held-out chinchilla runs and 91-95% of
data_constrained runs inside their 95% intervals. Pure numpy/scipy/polars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl
from scipy import stats

from analysis.errors import AnalysisInputError
from analysis.fit.constrained import BASE_NAMES, fit_stage1
from analysis.fit.diagnostics import at_bounds
from analysis.fit.fit import FitResult, fit_law
from analysis.laws.laws import Chinchilla, DataConstrained, Law

__all__ = ["EXPONENT_STEP", "LAWS_2D", "MAX_CONDITION", "PARAMS_2D", "HeldOutRun", "HeldOutSummary",
           "Holdout2D", "count_label", "holdout_largest_2d", "law_2d", "min_sizes_2d"]

LAWS_2D = ("chinchilla", "data_constrained")
PARAMS_2D = {"chinchilla": 5, "data_constrained": 7}
"""Parameters of each law (the residual degrees of freedom are runs - parameters)."""
MAX_CONDITION = 1e8
"""A stage's Jacobian (unit-norm columns) with a larger condition number is a flat valley."""
EXPONENT_STEP = 0.1
"""How far an exponent at its bound is moved to see whether a prediction depends on it."""
_DECADE = math.log(10.0)
_SATURATION = ("R_D", "R_N")


def count_label(v: float) -> str:
    """271000.0 -> '271k', 1.2e9 -> '1.2B' (sizes, tokens and budgets in lines); from 1e12
    on (FLOPs) in scientific notation, 1.74e12 -> '1.74e+12'. The held-out lines of both
    extrapolation checks use it (``analysis.recipes.extrapolation`` re-exports it)."""
    if abs(v) >= 1e12:
        return f"{v:.3g}"
    for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


@dataclass(frozen=True)
class HeldOutRun:
    """One held-out run, predicted by the law refitted without its size."""

    N: float
    D: float
    U: float  # unique tokens (nan for chinchilla)
    observed: float
    predicted: float
    lo: float  # prediction interval for the observation, lower end
    hi: float
    covered: bool

    @property
    def error(self) -> float:
        """observed - predicted, nats."""
        return self.observed - self.predicted


class HeldOutSummary:
    """What a held-out check says of its ``points`` (each with ``covered`` and ``error``)
    given its ``why`` ("" when checked): shared by ``Holdout2D`` and the one-variable
    ``analysis.recipes.extrapolation.HoldoutCheck``."""

    @property
    def checked(self) -> bool:
        return not self.why  # type: ignore[attr-defined]

    @property
    def covered(self) -> bool:
        """Every held-out observation inside its interval (False when not checked)."""
        return self.checked and all(p.covered for p in self.points)  # type: ignore[attr-defined]

    @property
    def max_abs_error(self) -> float:
        return max((abs(p.error) for p in self.points),  # type: ignore[attr-defined]
                   default=float("nan"))


@dataclass(frozen=True)
class Holdout2D(HeldOutSummary):
    """The extrapolation check of a two-variable law: refit without the ``k`` largest N."""

    law: str
    k: int
    level: float
    sizes: int  # distinct N in the data
    runs: int  # runs in the refit
    points: tuple[HeldOutRun, ...]  # held-out runs by (N, D, U); () when not checked
    refit: dict[str, float] = field(default_factory=dict)  # natural parameters; {} if none
    dof: int = 0  # runs - parameters of the refit
    why: str = ""  # "" when checked, else why not (in numbers)

    def line(self) -> str:
        """One line: 'held out N = 1B (3 runs, 3 covered): D = 2B predicted 2.413 (95% PI
        2.38-2.45), observed 2.401, error -0.012 nats, covered; D = ...'."""
        if not self.checked:
            return f"extrapolation check: {self.why}"
        pct = f"{100 * self.level:g}%"
        sizes = ", ".join(count_label(v) for v in sorted({p.N for p in self.points}))
        hit = sum(p.covered for p in self.points)

        def one(p: HeldOutRun) -> str:
            at = f"N = {count_label(p.N)}, " if self.k > 1 else ""
            at += f"D = {count_label(p.D)}" + ("" if math.isnan(p.U) else f", U = {count_label(p.U)}")
            return (f"{at} predicted {p.predicted:.3f} ({pct} PI {p.lo:.3g}-{p.hi:.3g}), "
                    f"observed {p.observed:.3f}, error {p.error:+.3f} nats, "
                    f"{'covered' if p.covered else 'NOT covered'}")

        head = (f"held out N = {sizes}" if self.k == 1
                else f"held out the largest {self.k} (N = {sizes})")
        runs = f"{len(self.points)} run" + ("s" if len(self.points) != 1 else "")
        return (f"{head} ({runs}, {hit} covered): "
                + "; ".join(one(p) for p in self.points))


def min_sizes_2d(law: str) -> int:
    """Distinct N a refit needs at the least: 2 (a law of N and D is not fitted on one N).
    The runs it needs are checked by the refit itself (parameters + 1)."""
    law_2d(law)
    return 2


def law_2d(name: str) -> Law:
    if name == "chinchilla":
        return Chinchilla()
    if name == "data_constrained":
        return DataConstrained()
    raise AnalysisInputError(f"a two-variable law is one of {list(LAWS_2D)}, got '{name}'")


def _columns(law: Law, frame: pl.DataFrame) -> dict[str, np.ndarray]:
    return {c: frame[c].to_numpy().astype(float) for c in law.columns}


def _jacobian(law: Law, params: dict[str, float], X: dict[str, np.ndarray]):
    """(L (n,), dL/dz (n, P)) in the law's internal coordinates z (logs of the scales)."""
    theta = law.to_internal(params)[None, :]
    lp, parts = law.log_predict(theta, X, grad=True)
    L = np.exp(lp[0])
    n = L.size
    cols = [np.broadcast_to(w[0] if v is None else w[0] * v, (n,)) for w, v in parts]
    return L, np.stack(cols, axis=1) * L[:, None]


def _shift(law: Law, name: str, value: float) -> list[float]:
    """Values a decade away (an exponent ``EXPONENT_STEP`` away), inside the law's box."""
    lo, hi = law.bounds[name]
    if name in law.log_params:
        z = math.log(value)
        return [math.exp(min(max(z + s, lo), hi)) for s in (-_DECADE, _DECADE)]
    return [min(max(value + s, lo), hi) for s in (-EXPONENT_STEP, EXPONENT_STEP)]


def _pinv(J: np.ndarray, what: str) -> tuple[np.ndarray | None, str]:
    """(J'J)^+ J' with unit-norm columns, or (None, why) when J is a flat valley."""
    if J.shape[1] == 0:
        return np.zeros((0, J.shape[0])), ""
    norms = np.linalg.norm(J, axis=0)
    if np.any(norms == 0):
        return None, f"the refit is not identified: no run of {what} moves a parameter"
    sv = np.linalg.svd(J / norms, compute_uv=False)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")
    if not cond <= MAX_CONDITION:
        return None, (f"the refit is not identified: the Jacobian of {what} has condition "
                      f"number {cond:.2g} > {MAX_CONDITION:g} (a flat valley)")
    return np.linalg.pinv(J / norms) / norms[:, None], ""


def refit_2d(train: pl.DataFrame, law: str, *, seed: int = 0,
             max_rounds: int = 5) -> tuple[FitResult, np.ndarray]:
    """The least-squares refit the interval is derived for (module docstring), and the mask
    (n,) of the runs its base law was fitted on (all of them for chinchilla).

    chinchilla: ``fit_law``. data_constrained: the two stages of
    ``constrained.fit_data_constrained``: ``constrained.fit_stage1`` (one-epoch runs, then
    N <= N_opt(U) under the last base law until the set of runs stops changing, at most
    ``max_rounds``), the result's ``base`` holding stage 1; run here without that function's
    identifiability diagnostics (profiles, resampled stages), which ``_linearised`` replaces
    by its own, from the same linearisation as the interval."""
    opts = dict(loss="mse", space="linear", seed=seed, warn=False)
    if law == "chinchilla":
        return fit_law(Chinchilla(), train, **opts), np.ones(train.height, dtype=bool)
    idx = "__row__"
    base, chosen = fit_stage1(train.with_row_index(idx), max_rounds=max_rounds, **opts)
    current = base.params
    fit = fit_law(DataConstrained(), train, fixed={p: current[p] for p in BASE_NAMES}, **opts)
    mask = np.zeros(train.height, dtype=bool)
    mask[chosen[idx].to_numpy()] = True
    return replace(fit, base=base), mask


def _moves(law: Law, params: dict[str, float], names, held: dict[str, np.ndarray],
           pred: np.ndarray, s: float, n: int, why: str) -> str:
    """Why not, when moving one of ``names`` a decade (an exponent by ``EXPONENT_STEP``)
    moves a held-out prediction by more than ``s``; "" when none does."""
    for name in names:
        for v in _shift(law, name, params[name]):
            moved = float(np.max(np.abs(law.predict({**params, name: v}, held) - pred)))
            if moved > s:
                how = "a decade" if name in law.log_params else f"by {EXPONENT_STEP:g}"
                return (f"the refit on {n} runs does not identify {name} = {params[name]:.3g} "
                        f"({why}), and moving it {how} moves a held-out prediction by "
                        f"{moved:.3g} nats > s = {s:.3g}")
    return ""


def _joint_sse(train: pl.DataFrame, params: dict[str, float]) -> float:
    """SSE of the data-constrained law fitted in one stage (all 7 parameters, least squares
    from the two-stage optimum): the residual scale's estimate, s^2 = SSE / (n - 7). The
    two-stage SSE is not: its base law, fitted on the stage-1 runs alone, leaves an
    extrapolation error in the other runs' residuals that stage 2 cannot absorb."""
    joint = fit_law(DataConstrained(), train, loss="mse", space="linear", starts=params,
                    warn=False)
    return float(np.sum(joint.residuals ** 2))


def _linearised(fit: FitResult, stage1: np.ndarray, train: pl.DataFrame, law_name: str,
                held: dict[str, np.ndarray]):
    """(predictions (m,), s^2, dof, ||g0 M||^2 (m,)), or why (str) when not identified."""
    law = fit.law
    params = dict(fit.params)
    names = law.param_names
    X = _columns(law, train)
    L, J = _jacobian(law, params, X)
    y = train["loss"].to_numpy().astype(float)
    n = y.size
    pred, G = _jacobian(law, params, held)
    sse = float(np.sum((y - L) ** 2))
    dof = n - len(names)
    if dof < 1:
        return f"the refit on {n} runs has {dof} residual degrees of freedom"
    s_rough = math.sqrt(sse / dof)
    # Parameters at a bound: held fixed, if the held-out predictions do not depend on them.
    bound = dict(at_bounds(fit))
    if fit.base is not None:
        bound.update(at_bounds(fit.base))
    why = _moves(law, params, bound, held, pred, s_rough, n, "at a bound of the box")
    if why:
        return why
    idx = {p: i for i, p in enumerate(names)}
    M = np.zeros((len(names), n))
    if law_name == "chinchilla":
        free = [idx[p] for p in names if p not in bound]
        P, why = _pinv(J[:, free], f"its {n} runs")
        if P is None:
            return why
        M[free] = P
    else:
        bfree = [idx[p] for p in BASE_NAMES if p not in bound]
        rfree = [idx[p] for p in _SATURATION if p not in bound]
        P1, why = _pinv(J[np.ix_(stage1, bfree)], f"stage 1's {int(stage1.sum())} runs")
        if P1 is None:
            return why
        Mb = np.zeros((len(bfree), n))
        Mb[:, stage1] = P1
        M[bfree] = Mb
        P2, why = _pinv(J[:, rfree], f"stage 2's {n} runs")
        if P2 is None:
            return why
        M[rfree] = P2 @ (np.eye(n) - J[:, bfree] @ Mb)
    s2 = sse / dof
    if law_name == "data_constrained":
        s2 = min(s2, _joint_sse(train, params) / dof)
    # A saturation constant whose linearised 95% range spans more than a decade either way.
    se = np.sqrt(s2 * np.sum(M * M, axis=1))
    wide = [p for p in _SATURATION if p in idx and p not in bound
            and 1.96 * se[idx[p]] > _DECADE]
    why = _moves(law, params, wide, held, pred, math.sqrt(s2), n,
                 "its linearised 95% range spans more than a decade")
    if why:
        return why
    return pred, s2, dof, np.sum((G @ M) ** 2, axis=1)


def holdout_largest_2d(data: pl.DataFrame, law: str, k: int, level: float = 0.95, *,
                       seed: int = 0) -> Holdout2D:
    """Refit ``law`` (``LAWS_2D``) on ``data`` (columns N, D[, U], loss) without every run at
    its ``k`` largest distinct N, predict those runs with ``level`` prediction intervals
    (module docstring). A refit that cannot be made or is not identified gives a Holdout2D
    with no points and ``why`` in numbers."""
    lw = law_2d(law)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise AnalysisInputError(f"holdout k must be an integer >= 1, got {k!r}")
    if not 0 < level < 1:
        raise AnalysisInputError(f"level must be in (0, 1), got {level}")
    for c in (*lw.columns, "loss"):
        if c not in data.columns:
            raise AnalysisInputError(f"{law} needs column '{c}'; the data has {data.columns}")
    k = int(k)
    sizes = np.unique(data["N"].to_numpy().astype(float))
    n = int(sizes.size)
    p = PARAMS_2D[law]
    base = dict(law=law, k=k, level=level, sizes=n)
    if n - k < min_sizes_2d(law):
        return Holdout2D(**base, runs=0, points=(), dof=0,
                         why=f"{n} sizes: the refit without the largest {k} would have "
                             f"{max(n - k, 0)}, a law of N and D needs >= 2")
    cut = sizes[n - k]
    keep = data["N"].to_numpy() < cut
    train, held = data.filter(pl.Series(keep)), data.filter(pl.Series(~keep))
    if train.height < p + 1:
        return Holdout2D(**base, runs=train.height, points=(), dof=train.height - p,
                         why=f"the refit would have {train.height} runs, {law} needs >= "
                             f"{p + 1} ({p} parameters + 1 residual degree of freedom)")
    try:
        fit, stage1 = refit_2d(train, law, seed=seed)
    except AnalysisInputError as err:
        return Holdout2D(**base, runs=train.height, points=(), dof=train.height - p,
                         why=f"the refit on {train.height} runs failed: {err}")
    Xh = _columns(lw, held)
    out = _linearised(fit, stage1, train, law, Xh)
    if isinstance(out, str):
        return Holdout2D(**base, runs=train.height, points=(), refit=dict(fit.params),
                         dof=train.height - p, why=out)
    pred, s2, dof, gm = out
    t = float(stats.t.ppf(0.5 + level / 2, dof))
    sd = np.sqrt(s2 * (gm + 1.0))
    yo = held["loss"].to_numpy().astype(float)
    U = Xh.get("U", np.full(yo.size, np.nan))
    pts = [
        HeldOutRun(N=float(a), D=float(b), U=float(u), observed=float(o), predicted=float(q),
                   lo=float(q - t * s), hi=float(q + t * s),
                   covered=bool(q - t * s <= o <= q + t * s))
        for a, b, u, o, q, s in zip(Xh["N"], Xh["D"], U, yo, pred, sd)]
    pts.sort(key=lambda r: (r.N, r.D, r.U))
    return Holdout2D(**base, runs=train.height, points=tuple(pts), refit=dict(fit.params),
                     dof=dof)
