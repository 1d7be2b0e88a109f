"""``fit_law``: multi-start, Huber-in-log-space fits of a scaling law (Besiroglu et al. 2024,
arXiv 2404.10102, and its code epoch-research/analyzing-chinchilla) by default; MSE and
linear-space residuals, ties and weights as options.

What a fit does, exactly (the default ``starts="auto"``: "varpro" for a Chinchilla fit with
A, B, E free and untied, alpha and beta free or tied to each other; "grid" otherwise):

0. "varpro" (solvers/varpro.py; Golub & Pereyra 1973): on a 60 x 60 grid of (alpha, beta)
   E, A, B solve a non-negative least-squares fit in relative (log-like) residuals; the
   grid's ``VARPRO_KEEP`` = 8 best local minima/points are the starts; steps 3-4 below
   (no screen) minimise the real objective from them. On Epoch's data it reaches the grid's optimum to 1e-14 relative
   (bench/varpro_speed.py).
1. "grid" starts: the Cartesian product of the law's per-parameter grids over the free
   parameters (Chinchilla: alpha, beta in {0, .5, .., 2}, e in {-1, -.5, .., 1},
   a, b in {0, 5, .., 25}: Epoch's 4,500 starts; DataConstrained: 32,400), clipped into
   the bounds.
2. Screen: every start takes up to ``SCREEN_ITERS`` = 12 iterations of batched, projected,
   float32 Levenberg-Marquardt, the worse half of the starts dropped every 2 (solvers/search.py).
3. Continue: the ``KEEP`` = 64 best run on in float64 Levenberg-Marquardt to float64's
   resolution (solvers/search.py).
4. Polish: the ``POLISH`` = 4 best of those go through scipy's L-BFGS-B (analytic
   gradient, ftol 1e-15, gtol 1e-10); the lowest objective wins.
5. Diagnose: a free parameter at its box bound is named in ``warnings``
   (diagnostics.bound_warnings), so is one that the data leave open towards a bound
   (diagnostics.py, open_side_warnings), a flat Hessian valley and too few points per parameter
   (diagnostics.identifiability_warnings); each is also raised as an
   ``IdentifiabilityWarning``. ``starts_converged`` is the share of the continued starts
   that reached the best objective (starts.share_converged). Curved valleys need
   ``result.profile(p)`` (profile.py), which refits and is therefore not run by default.

``progress=True`` prints a line per second per stage to stderr (a callable gets every
report, progress.FitProgress); ``time_budget_s`` stops the screen, the continuation or the
polish once that much wall time is spent, keeps the best point so far and says so in
``warnings`` (a ``FitBudgetWarning``).

On Epoch's data the optimum is reached from every one of the 64 starts kept after the
screen, so screening loses nothing there; ``screen_iters``/``keep`` are arguments for
harder problems. bench/fit_speed.py times the grid fits against a plain scipy loop
(Epoch's 4,500 starts: 0.3 s of CPU; DataConstrained's 32,400 on 182 runs: 1.8 s).

Options: ``tie`` (laws/tie.py), per-point ``weights``, the residual's ``space`` ("log":
log Lhat - log L, Epoch's choice; "linear": Lhat - L) with ``loss`` Huber (``delta`` in the
residual's units) or MSE (laws/fit_objective.py). Data a fit cannot support are refused before any
fitting (laws/checks.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.errors import AnalysisInputError, FitBudgetWarning, IdentifiabilityWarning
from analysis.fit.diagnostics import bound_warnings, identifiability_warnings, open_side_warnings
from analysis.laws.checks import check_fit_data, column_array, point_weights, require_points
from analysis.laws.fit_objective import Objective
from analysis.laws.laws import Law, get_law
from analysis.laws.tie import coordinates
from analysis.progress import FitClock, ProgressFn, progress_fn
from analysis.solvers.search import (
    KEEP,
    POLISH,
    SCREEN_ITERS,
    search,
)
from analysis.solvers.starts import MAX_GRID, box, share_converged, start_points
from analysis.solvers.varpro import varpro_applies, varpro_starts

__all__ = [
    "KEEP",
    "MAX_GRID",
    "POLISH",
    "SCREEN_ITERS",
    "FitResult",
    "fit_law",
    "law_loss_column",
    "require_points",
]


@dataclass(frozen=True)
class FitResult:
    """A fitted law. ``params`` are natural values keyed by the law's parameter names (a
    tied parameter included, equal to its target)."""

    law: Law
    params: dict[str, float]
    objective: float
    r2: float  # 1 - SS_res / SS_tot of the loss itself (weighted when weights are given)
    residuals: np.ndarray  # (n,) at the optimum in the fit's space: log Lhat - log L or Lhat - L
    n_points: int
    free: tuple[str, ...]  # the free coordinates (a tied parameter is under its target's name)
    fixed: dict[str, float]
    loss: str
    delta: float
    n_starts: int
    converged: bool
    warnings: tuple[str, ...]
    problem: Objective = field(repr=False)
    z: np.ndarray = field(repr=False)  # (P_free,) internal optimum
    lo: np.ndarray = field(repr=False)
    hi: np.ndarray = field(repr=False)
    base: FitResult | None = None  # stage-1 fit of a two-stage DataConstrained fit
    tied: dict[str, str] = field(default_factory=dict)  # tied parameter -> its target
    space: str = "log"  # the residual's space: "log" or "linear"
    weights: np.ndarray | None = field(default=None, repr=False)  # (n,) per-point weights
    seed: int = 0  # seeds integer starts and a subsampled grid
    starts_converged: float = 1.0
    """Share of the ``starts_run`` starts run to convergence whose final objective is within
    starts.STARTS_RTOL (1e-6 relative) of the best. Those are all starts when there are at
    most ``keep`` (64), else the ``keep`` best after the screen (solvers/starts.py)."""
    starts_run: int = 0  # starts run to convergence: min(n_starts, keep)
    not_identified: dict[str, str] = field(default_factory=dict)
    """{parameter: why} for parameters the data do not identify (a data-constrained fit's
    R_D*, R_N*: fit/saturation_identified.py); their values are not to be shown bare."""

    def predict(self, data: Any) -> np.ndarray:
        """Predicted loss (n,) on ``data`` (polars DataFrame or mapping of columns)."""
        return self.law.predict(self.params, data)

    def bootstrap(self, n: int = 1000, seed: int = 0, workers: int | None = None):
        """Resample points with replacement ``n`` times and refit; see bootstrap.py."""
        from analysis.fit.bootstrap import bootstrap_fit

        return bootstrap_fit(self, n=n, seed=seed, workers=workers)

    def profile(self, param: str, level: float = 0.95, n: int = 24):
        """Profile-likelihood CI of ``param`` with flat-side flags; see profile.py."""
        from analysis.fit.profile import profile_fit

        return profile_fit(self, param, level=level, n=n)

    def summary(self) -> str:
        vals = ", ".join(f"{k}={v:.6g}" for k, v in self.params.items())
        return f"{self.law.name}: {vals}; objective={self.objective:.6g}; R^2={self.r2:.4f}"


def _r2(y: np.ndarray, pred: np.ndarray, w: np.ndarray | None) -> float:
    """1 - SS_res / SS_tot of the loss (weighted sums and mean when ``w`` is given)."""
    if w is None:
        ss_res = float(np.sum((y - pred) ** 2))
        ss_tot = float(np.sum((y - y.mean()) ** 2))
    else:
        ss_res = float(np.sum(w * (y - pred) ** 2))
        ss_tot = float(np.sum(w * (y - np.average(y, weights=w)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


def fit_law(
    law: str | Law,
    data: Any,
    *,
    loss: str = "huber",
    delta: float = 1e-3,
    space: str = "log",
    fixed: Mapping[str, float] | None = None,
    tie: Mapping[str, str] | None = None,
    weights: np.ndarray | str | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    starts: Any = "auto",
    seed: int = 0,
    screen_iters: int = SCREEN_ITERS,
    keep: int = KEEP,
    polish: int = POLISH,
    warn: bool = True,
    progress: bool | ProgressFn | None = None,
    time_budget_s: float | None = None,
) -> FitResult:
    """Fit ``law`` to ``data`` (columns N, D, U as the law needs, and ``loss``).

    ``loss``: "huber" or "mse" of the residual in ``space`` ("log": log Lhat - log L;
    "linear": Lhat - L); ``delta``: Huber's threshold in the residual's units.
    ``fixed``: natural values of parameters held constant. ``tie``: {parameter: target},
    the parameter shares its target's free coordinate (e.g. {"beta": "alpha"}).
    ``weights``: per-point weights >= 0, an array (n,) or a column name (weighted objective
    SUM w_i rho(r_i); the bootstrap resamples points with their weights).
    ``bounds``: natural-value (lo, hi) per free parameter (None = the law's default).
    ``starts``: "auto" (the default: "varpro" where it applies, else "grid"), "varpro"
    (refused where it does not apply), "grid", an int (that many uniform starts over the
    grid's range, drawn with ``seed``) or natural-value start mapping(s).
    ``progress``: True prints progress to stderr, a callable receives every
    progress.FitProgress. ``time_budget_s``: wall seconds after which the fit stops and
    keeps its best point so far (named in ``warnings``; a ``FitBudgetWarning``).
    Returns a FitResult; parameters at a box bound and other identifiability problems are
    listed in ``result.warnings`` and warned about (``IdentifiabilityWarning``, when
    ``warn``). Unusable data raise a one-line AnalysisInputError (laws/checks.py): bad values,
    fewer than 3 points or than free parameters + 1 (TooFewPointsError), a constant loss,
    a constant N or D.
    """
    law = get_law(law)
    clock = FitClock(law.name, time_budget_s, progress_fn(progress))
    fixed = {k: float(v) for k, v in (fixed or {}).items()}
    law.check_names(fixed)
    coords = coordinates(law, fixed, tie)
    free = list(coords.names)
    X = law.inputs(data)
    y = law_loss_column(data)
    w = point_weights(data, weights, y.size)
    check_fit_data(law, X, y, len(free), w)
    template = np.array(
        [law.param_to_internal(p, fixed[p]) if p in fixed else 0.0 for p in law.param_names]
    )
    free_idx = np.array([law.param_names.index(p) for p in coords.varied], dtype=int)
    obj = Objective(
        law,
        X,
        np.log(y),
        template,
        free_idx,
        loss=loss,
        delta=delta,
        space=space,
        point_weights=w,
        coords=coords.index,
    )
    lo, hi = box(law, coords, bounds)

    if not free:  # everything fixed: just evaluate
        z_best, n_starts, ok, share, n_run = np.zeros(0), 0, True, 1.0, 0
        f_best = float(obj.value_and_grad(np.zeros((1, 0)), grad=False)[0][0])
    else:
        if _use_varpro(starts, obj, coords.names):  # no screen (solvers/varpro.py)
            z0 = varpro_starts(obj, coords.names, lo, hi)
            cont, (z_best, f_best, ok) = search(obj, z0, lo, hi, clock, 0, z0.shape[0], polish)
        else:
            grid = "grid" if starts == "auto" else starts
            z0 = start_points(law, coords.names, grid, lo, hi, seed)
            cont, (z_best, f_best, ok) = search(obj, z0, lo, hi, clock, screen_iters, keep, polish)
        n_starts = z0.shape[0]
        if not np.isfinite(f_best):
            raise AnalysisInputError(f"{law.name}: no start reached a finite objective")
        share, n_run = share_converged(cont.f, f_best), int(cont.f.size)

    theta = obj.full(z_best[None, :])[0]
    params = {**law.as_dict(theta), **fixed}  # fixed values exactly as given, not exp(log(v))
    pred = np.exp(law.log_predict(theta[None, :], X)[0])
    if space == "log":
        residuals = np.log(pred) - np.log(y)
    else:
        residuals = obj.residuals(z_best[None, :])[0]
    msgs = bound_warnings(law, free, z_best, lo, hi, coords.tied)
    msgs += open_side_warnings(obj, z_best, f_best, free, lo, hi, law)
    msgs += identifiability_warnings(obj, z_best, free) if free else []
    budget = clock.warning()
    if warn:
        for m in msgs:
            warnings.warn(f"{law.name}: {m}", IdentifiabilityWarning, stacklevel=2)
        for m in budget:
            warnings.warn(f"{law.name}: {m}", FitBudgetWarning, stacklevel=2)
    msgs = budget + msgs
    return FitResult(
        law=law,
        params=params,
        objective=f_best,
        r2=_r2(y, pred, w),
        residuals=residuals,
        n_points=int(y.size),
        free=tuple(free),
        fixed=fixed,
        loss=loss,
        delta=delta,
        n_starts=n_starts,
        converged=ok,
        warnings=tuple(msgs),
        problem=obj,
        z=z_best,
        lo=lo,
        hi=hi,
        tied=dict(coords.tied),
        space=space,
        weights=w,
        seed=seed,
        starts_converged=share,
        starts_run=n_run,
    )


def _use_varpro(starts: Any, obj: Objective, names: tuple[str, ...]) -> bool:
    """Whether the fit's starts come from solvers/varpro.py (see ``fit_law``'s ``starts``)."""
    if not isinstance(starts, str) or starts not in ("auto", "varpro"):
        return False
    if varpro_applies(obj, names):
        return True
    if starts == "varpro":
        raise AnalysisInputError(
            f"starts='varpro' needs the chinchilla law with A, B, E free and untied; "
            f"this fit is {obj.law.name} with free coordinates {list(names)}: use 'grid'"
        )
    return False


def law_loss_column(data: Any) -> np.ndarray:
    """The ``loss`` column as float64 (n,), checked finite and > 0 (checks.column_array)."""
    return column_array(data, "loss")
