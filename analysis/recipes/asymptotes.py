"""Recipes compared by their asymptotes (Kim et al. 2025, arXiv 2509.14786) and the
compute-optimal allocation (Hoffmann et al. 2022, arXiv 2203.15556).

- ``compute_optimal``: N_opt = G (C/6)^a, D_opt = (C/6)^b / G with
  G = (alpha A / (beta B))^(1/(alpha+beta)), a = beta/(alpha+beta), b = alpha/(alpha+beta).
- ``compute_optimal_constrained``: the DataConstrained law has no closed form; minimise
  it over N along D = C/(6N) for a unique-token budget U (1-D bounded search in log N).
- ``fit_asymptote``: Kim et al.'s A/x^B + C by least squares (A, C >= 0), an adapter over
  the one engine of this law, ``kim_law.fit_kim``, x in billions or millions (parameters,
  tokens; ``kim_law.SCALE``) or the member count K. Used for the joint N, K asymptote (fit the
  per-N K->inf asymptotes vs N) and data scaling. ``fixed_B`` holds B at a value (then
  two free parameters, and n - 2 degrees of freedom for the intervals).
- ``ensemble_asymptote``: the loss of a K-member ensemble as A/K + C (B = 1). For iid
  members the loss of their average exceeds its K -> inf limit by a variance term
  proportional to 1/K: exactly for squared error (the bias-variance decomposition of an
  average; Krogh & Vedelsby 1995, the ambiguity decomposition), and to second order for
  cross-entropy of averaged logits (Wood et al. 2023, "A Unified Theory of Diversity in
  Ensemble Learning", arXiv 2301.03962). A free B is not identified from K <= 5 members
  (the demo's 4-member ensemble: C's 95% CI spans 4 nats with B free, 0.06 with B = 1).
- ``data_efficiency``: invert a recipe's data-scaling fit L(D) = A/D^B + C,
  D_eff(L) = (A/(L - C))^(1/B); multiplier = D_eff(L_new) / D_eff(L_ref).
- ``compare_asymptotes``: one table of asymptotes with SEs and CIs across recipes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import optimize, stats

from analysis.errors import AnalysisInputError
from analysis.laws.laws import Chinchilla, DataConstrained
from analysis.recipes.kim_law import fit_kim, profile_fit

__all__ = [
    "AsymptoteFit",
    "compare_asymptotes",
    "compute_optimal",
    "t_scaled_se",
    "compute_optimal_constrained",
    "data_efficiency",
    "effective_data",
    "ensemble_asymptote",
    "fit_asymptote",
    "joint_asymptote",
]


@dataclass(frozen=True)
class AsymptoteFit:
    """L(x) = A / x^B + C fitted by (weighted) least squares (``kim_law.fit_kim``); ``cov``
    is the Gauss-Newton covariance s^2 (J'WJ)^-1 (Seber & Wild 1989, sec. 2.1)."""

    A: float
    B: float
    C: float
    cov: np.ndarray  # (3, 3) for (A, B, C); row and column of B are 0 when B is fixed
    x: np.ndarray
    y: np.ndarray
    n_free: int = 3
    """Free parameters: 3, or 2 when B was held fixed (``fit_asymptote(fixed_B=...)``)."""
    w: np.ndarray | None = None
    """Per-point weights of the fit (None: all 1)."""

    def __call__(self, x) -> np.ndarray:
        return self.A / np.asarray(x, dtype=float) ** self.B + self.C

    @property
    def asymptote(self) -> float:
        return self.C

    @property
    def se(self) -> dict[str, float]:
        sd = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        return dict(zip(("A", "B", "C"), map(float, sd)))

    @property
    def r2(self) -> float:
        w = np.ones_like(self.y) if self.w is None else self.w
        ss_res = float(np.sum(w * (self.y - self(self.x)) ** 2))
        ss_tot = float(np.sum(w * (self.y - np.average(self.y, weights=w)) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")

    @property
    def dof(self) -> int:
        """Residual degrees of freedom, n - free parameters (at least 1)."""
        return max(self.x.size - self.n_free, 1)

    @property
    def has_ci(self) -> bool:
        """More points than parameters and a finite covariance: an interval exists."""
        return self.x.size > self.n_free and bool(np.all(np.isfinite(self.cov)))

    def band(self, x, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise delta-method interval of the fitted curve at ``x`` (t, ``dof``)."""
        x = np.asarray(x, dtype=float)
        jac = np.stack([x**-self.B, -self.A * np.log(x) * x**-self.B, np.ones_like(x)], axis=1)
        sd = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", jac, self.cov, jac), 0, None))
        h = stats.t.ppf(0.5 + level / 2, self.dof) * sd
        mid = self(x)
        return mid - h, mid + h

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t interval on C with ``dof`` degrees of freedom (wide with 4 points)."""
        h = stats.t.ppf(0.5 + level / 2, self.dof) * self.se["C"]
        return (self.C - h, self.C + h)

    def c_se_t(self, level: float = 0.95) -> float:
        """C's standard error widened for its Student-t interval (``t_scaled_se``)."""
        return t_scaled_se(self.se["C"], self.dof, level)

    def __str__(self) -> str:
        power = "x" if self.n_free == 2 and self.B == 1.0 else f"x^{self.B:.4g}"
        return f"{self.A:.4g}/{power} + {self.C:.4f}"


def t_scaled_se(se: float, dof: float, level: float = 0.95) -> float:
    """``se`` widened by t_{dof} / z at ``level``: a normal with this scale has the Student-t
    interval's ends (estimate +- t se) as its quantiles. A bootstrap that draws an
    asymptote from a normal (``data_multiplier``) needs it: with 5 sizes (2 residual dof) t
    is 4.30 against z's 1.96, and the plain standard error would make the multiplier's
    interval half as wide as the asymptote's own."""
    z = stats.norm.ppf(0.5 + level / 2)
    return float(stats.t.ppf(0.5 + level / 2, max(dof, 1)) / z * se)


def fit_asymptote(x, y, fixed_B: float | None = None, w=None) -> AsymptoteFit:
    """Kim et al.'s least-squares fit of A/x^B + C (Kim et al. 2025, arXiv 2509.14786);
    with ``fixed_B``, A/x^fixed_B + C (A and C free). ``w``: per-point weights (a point that
    is the mean of m seeds weighs m). An adapter: the fit is ``kim_law.fit_kim`` (the one
    engine of this law, polished by ``fit_law``), its covariance Gauss-Newton's
    s^2 (J'WJ)^-1; with as many points as parameters, the profiled interpolation
    (``kim_law.profile_fit``) without a covariance."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 3:
        raise AnalysisInputError(
            f"need >= 3 matching (x, y) points; got shapes {x.shape}, {y.shape}"
        )
    if np.any(x <= 0) or not np.all(np.isfinite(y)):
        raise AnalysisInputError("x must be > 0 and y finite")
    n_free = 3 if fixed_B is None else 2
    cov = np.zeros((3, 3))
    if x.size <= n_free:  # interpolation: no residual degree of freedom, no covariance
        A, B, C, _ = (float(v[0]) for v in profile_fit(x, y, w))
        return AsymptoteFit(A, B, C, cov=np.full((3, 3), np.nan), x=x, y=y, n_free=n_free)
    fit = fit_kim(x, y, w, fixed_B=fixed_B)
    free = list(fit.free)
    cov[np.ix_(free, free)] = fit.cov
    return AsymptoteFit(fit.A, fit.B, fit.E, cov=cov, x=x, y=y, n_free=fit.p,
                        w=fit.w)


def ensemble_asymptote(K, loss) -> AsymptoteFit:
    """Loss of a K-member (logit-averaged) ensemble vs K as A/K + C; C is K -> inf (the
    module docstring says why B = 1)."""
    return fit_asymptote(K, loss, fixed_B=1.0)


def joint_asymptote(N_billions, k_asymptotes) -> AsymptoteFit:
    """Per-N ensemble asymptotes vs N (billions) as A/N^B + C; C is the N, K -> inf limit."""
    return fit_asymptote(N_billions, k_asymptotes)


def compute_optimal(params: Mapping[str, float], C) -> tuple[np.ndarray, np.ndarray]:
    """Chinchilla-optimal (N_opt, D_opt) at compute C (FLOPs, C = 6 N D):
    ``laws.Chinchilla.compute_optimal``, the one closed form."""
    return Chinchilla.compute_optimal(params, C)


def compute_optimal_constrained(
    params: Mapping[str, float], C: float, U: float
) -> tuple[float, float]:
    """(N, D) minimising the DataConstrained law at compute C with U unique tokens."""
    law = DataConstrained()

    def loss(logn: float) -> float:
        n = np.exp(logn)
        return float(law.predict(params, {"N": [n], "D": [C / (6 * n)], "U": [U]})[0])

    lo, hi = np.log(1e3), np.log(C / 6.0 / 1e3)
    grid = np.linspace(lo, hi, 200)
    i = int(np.argmin([loss(g) for g in grid]))
    res = optimize.minimize_scalar(
        loss,
        bounds=(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]),
        method="bounded",
        options={"xatol": 1e-10},
    )
    n = float(np.exp(res.x))
    return n, C / (6.0 * n)


def effective_data(fit: AsymptoteFit, loss) -> np.ndarray:
    """D_eff(L) = (A / (L - C))^(1/B): data the fitted recipe needs to reach L (nan if L <= C)."""
    L = np.asarray(loss, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(L > fit.C, (fit.A / (L - fit.C)) ** (1.0 / fit.B), np.nan)


def data_efficiency(fit: AsymptoteFit, loss_new, loss_ref) -> np.ndarray:
    """How many times more data the fitted (reference) recipe needs to match ``loss_new``
    than to reach ``loss_ref``: D_eff(L_new) / D_eff(L_ref). A does not enter."""
    return effective_data(fit, loss_new) / effective_data(fit, loss_ref)


def compare_asymptotes(fits: Mapping[str, object], level: float = 0.95) -> pl.DataFrame:
    """Table recipe | asymptote | se | lo | hi | method, best first.

    Values: an ``AsymptoteFit`` (Gauss-Newton covariance, t interval), a pair
    (FitResult, BootstrapResult) (the asymptote E, bootstrap SE and percentile CI), or a
    bare number (published value, no interval).
    """
    from analysis.fit.bootstrap import BootstrapResult
    from analysis.fit.fit import FitResult

    rows = []
    for name, item in fits.items():
        if isinstance(item, AsymptoteFit):
            lo, hi = item.ci(level)
            rows.append((name, item.C, item.se["C"], lo, hi, "Gauss-Newton covariance"))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], FitResult):
            fit, boot = item
            if not isinstance(boot, BootstrapResult):
                raise AnalysisInputError(f"{name}: expected (FitResult, BootstrapResult)")
            lo, hi = boot.ci(level)["E"]
            rows.append((name, fit.params["E"], boot.se["E"], lo, hi, f"bootstrap n={boot.n}"))
        elif isinstance(item, (int, float)):
            rows.append((name, float(item), None, None, None, "published"))
        else:
            raise AnalysisInputError(f"{name}: cannot read an asymptote from {type(item).__name__}")
    return pl.DataFrame(
        rows, schema=["recipe", "asymptote", "se", "lo", "hi", "method"], orient="row"
    ).sort("asymptote")
