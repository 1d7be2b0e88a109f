"""``fit_law``: multi-start, Huber-in-log-space fits of a scaling law (Besiroglu et al. 2024,
arXiv 2404.10102, and its code epoch-research/analyzing-chinchilla).

What a fit does, exactly (``starts="grid"``):

1. Starts: the Cartesian product of the law's per-parameter grids over the free
   parameters (Chinchilla: alpha, beta in {0, .5, .., 2}, e in {-1, -.5, .., 1},
   a, b in {0, 5, .., 25}: Epoch's 4,500 starts), clipped into the bounds.
2. Screen: every start takes ``SCREEN_ITERS`` = 25 iterations of batched projected L-BFGS
   with analytic gradients (multistart.py), all starts vectorised together.
3. Continue: the ``KEEP`` = 64 lowest-objective rows run on to convergence (gtol 1e-9,
   relative ftol 1e-12) in the same batched optimiser.
4. Polish: the ``POLISH`` = 4 best of those go through scipy's L-BFGS-B (analytic
   gradient, ftol 1e-15, gtol 1e-10); the lowest objective wins.

On Epoch's data the optimum is reached from over a thousand of the 4,500 starts, and from
every one of the best 10 after 10 screening iterations, so screening loses nothing there;
``screen_iters``/``keep`` are arguments for harder problems.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize

from analysis.diagnostics import identifiability_warnings
from analysis.errors import AnalysisInputError, IdentifiabilityWarning, TooFewPointsError
from analysis.laws import Law, get_law
from analysis.multistart import lbfgs_batched
from analysis.objective import Objective

__all__ = ["KEEP", "MAX_GRID", "POLISH", "SCREEN_ITERS", "FitResult", "fit_law", "require_points"]

SCREEN_ITERS = 25
KEEP = 64
POLISH = 4
MAX_GRID = 50_000  # a larger product grid is subsampled (seeded) to this many starts


@dataclass(frozen=True)
class FitResult:
    """A fitted law. ``params`` are natural values keyed by the law's parameter names."""

    law: Law
    params: dict[str, float]
    objective: float
    r2: float
    residuals: np.ndarray  # (n,) log Lhat - log L at the optimum
    n_points: int
    free: tuple[str, ...]
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

    def predict(self, data: Any) -> np.ndarray:
        """Predicted loss (n,) on ``data`` (polars DataFrame or mapping of columns)."""
        return self.law.predict(self.params, data)

    def bootstrap(self, n: int = 1000, seed: int = 0, workers: int | None = None):
        """Resample points with replacement ``n`` times and refit; see bootstrap.py."""
        from analysis.bootstrap import bootstrap_fit

        return bootstrap_fit(self, n=n, seed=seed, workers=workers)

    def summary(self) -> str:
        vals = ", ".join(f"{k}={v:.6g}" for k, v in self.params.items())
        return f"{self.law.name}: {vals}; objective={self.objective:.6g}; R^2={self.r2:.4f}"


def require_points(n: int, n_free: int, law: str, what: str = "points") -> None:
    """Refuse an underdetermined fit: ``n`` points for ``n_free`` free parameters need
    ``n >= n_free + 1`` (with fewer the law interpolates: zero residuals, zero-width CIs).
    Raises TooFewPointsError naming the count."""
    if n < n_free + 1:
        raise TooFewPointsError(n, n_free, law, what)


def _box(law: Law, free: list[str], bounds: Mapping[str, tuple[float, float]] | None):
    lo = np.array([law.bounds[p][0] for p in free], dtype=float)
    hi = np.array([law.bounds[p][1] for p in free], dtype=float)
    law.check_names(bounds)
    for p, (b_lo, b_hi) in (bounds or {}).items():
        if p not in free:
            raise AnalysisInputError(f"bounds given for '{p}', which is fixed")
        i = free.index(p)
        if b_lo is not None:
            lo[i] = law.param_to_internal(p, b_lo) if p in law.log_params else float(b_lo)
        if b_hi is not None:
            hi[i] = law.param_to_internal(p, b_hi) if p in law.log_params else float(b_hi)
        if not lo[i] < hi[i]:
            raise AnalysisInputError(f"bounds for '{p}' are empty: {(b_lo, b_hi)}")
    return lo, hi


def _starts(law: Law, free: list[str], starts: Any, lo, hi) -> np.ndarray:
    """Start points (S, P_free) in internal space."""
    if isinstance(starts, str):
        if starts != "grid":
            raise AnalysisInputError(
                f"starts must be 'grid', an int, or start points; got '{starts}'"
            )
        z = np.array(list(itertools.product(*[law.grid[p] for p in free])), dtype=float)
        if z.shape[0] > MAX_GRID:
            keep = np.random.default_rng(0).choice(z.shape[0], MAX_GRID, replace=False)
            z = z[np.sort(keep)]
    elif isinstance(starts, (int, np.integer)):
        rng = np.random.default_rng(0)
        g_lo = np.array([min(law.grid[p]) for p in free])
        g_hi = np.array([max(law.grid[p]) for p in free])
        z = g_lo + (g_hi - g_lo) * rng.random((int(starts), len(free)))
    else:  # a mapping or a sequence of mappings of natural values
        rows = [starts] if isinstance(starts, Mapping) else list(starts)
        z = np.array([[law.param_to_internal(p, r[p]) for p in free] for r in rows], dtype=float)
    if z.size == 0:
        raise AnalysisInputError("no start points")
    return np.clip(z.reshape(-1, len(free)), lo, hi)


def _polish(obj: Objective, z0: np.ndarray, lo, hi) -> tuple[np.ndarray, float, bool]:
    def fun(z):
        f, g = obj.value_and_grad(z[None, :])
        return float(f[0]), g[0]

    res = minimize(
        fun,
        z0,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20_000, "maxls": 50},
    )
    return res.x, float(res.fun), bool(res.success)


def fit_law(
    law: str | Law,
    data: Any,
    *,
    loss: str = "huber",
    delta: float = 1e-3,
    fixed: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    starts: Any = "grid",
    screen_iters: int = SCREEN_ITERS,
    keep: int = KEEP,
    polish: int = POLISH,
    warn: bool = True,
) -> FitResult:
    """Fit ``law`` to ``data`` (columns N, D, U as the law needs, and ``loss``).

    ``fixed``: natural values of parameters held constant. ``bounds``: natural-value
    (lo, hi) per free parameter (None = the law's default). ``starts``: "grid", an int
    (that many seeded uniform starts over the grid's range) or natural-value start
    mapping(s). Returns a FitResult; identifiability problems are warned about
    (``IdentifiabilityWarning``) and listed in ``result.warnings``. Fewer points than free
    parameters + 1 raise TooFewPointsError (an AnalysisInputError).
    """
    law = get_law(law)
    fixed = {k: float(v) for k, v in (fixed or {}).items()}
    law.check_names(fixed)
    X = law.inputs(data)
    y = law_loss_column(data)
    free = [p for p in law.param_names if p not in fixed]
    if free:
        require_points(int(y.size), len(free), law.name)
    template = np.array(
        [law.param_to_internal(p, fixed[p]) if p in fixed else 0.0 for p in law.param_names]
    )
    free_idx = np.array([law.param_names.index(p) for p in free], dtype=int)
    obj = Objective(law, X, np.log(y), template, free_idx, loss=loss, delta=delta)
    lo, hi = _box(law, free, bounds)

    if not free:  # everything fixed: just evaluate
        z_best, n_starts, ok = np.zeros(0), 0, True
        f_best = float(obj.value_and_grad(np.zeros((1, 0)), grad=False)[0][0])
    else:
        z0 = _starts(law, free, starts, lo, hi)
        n_starts = z0.shape[0]

        def fg(z, rows):
            return obj.value_and_grad(z)

        screened = lbfgs_batched(fg, z0, lo, hi, maxiter=screen_iters)
        order = np.argsort(np.where(np.isfinite(screened.f), screened.f, np.inf))[:keep]
        cont = lbfgs_batched(fg, screened.x[order], lo, hi, maxiter=5000)
        best = np.argsort(np.where(np.isfinite(cont.f), cont.f, np.inf))[:polish]
        cands = [_polish(obj, cont.x[i], lo, hi) for i in best]
        z_best, f_best, ok = min(cands, key=lambda c: c[1])
        if not np.isfinite(f_best):
            raise AnalysisInputError(f"{law.name}: no start reached a finite objective")

    theta = obj.full(z_best[None, :])[0]
    params = {**law.as_dict(theta), **fixed}  # fixed values exactly as given, not exp(log(v))
    pred = np.exp(law.log_predict(theta[None, :], X)[0])
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    msgs = identifiability_warnings(obj, z_best, free) if free else []
    if warn:
        for m in msgs:
            warnings.warn(f"{law.name}: {m}", IdentifiabilityWarning, stacklevel=2)
    return FitResult(
        law=law,
        params=params,
        objective=f_best,
        r2=r2,
        residuals=np.log(pred) - np.log(y),
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
    )


def law_loss_column(data: Any) -> np.ndarray:
    """The ``loss`` column as float64 (n,), checked finite and > 0."""
    try:
        col = data["loss"]
    except Exception:
        have = list(getattr(data, "columns", None) or list(data))
        raise AnalysisInputError(f"the data need a 'loss' column; they have {have}") from None
    y = np.asarray(col.to_numpy() if hasattr(col, "to_numpy") else col, dtype=float)
    if y.ndim != 1 or y.size == 0 or not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise AnalysisInputError("column 'loss' must hold finite values > 0 (and at least one row)")
    return y
