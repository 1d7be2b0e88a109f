"""The transfer law hp* = c · Π x_i^a_i, fitted to the groups' optima, and its intervals.

Weighted least squares of u*_g = ln hp*_g on z_g = (1, ln x_1, ..., ln x_p), weights
1 / SE_g² (``analysis.transfer.optimum``): β = (ZᵀWZ)⁻¹ ZᵀWu, covariance (ZᵀWZ)⁻¹.
When the residuals scatter more than the SEs explain (χ² / (n - k) > 1, k = p + 1), the
covariance is scaled by that reduced χ² (the Birge ratio; Birge 1932, and e.g. the
Particle Data Group's scale factor): the SEs set the relative weights, the scatter their
level. It is never scaled down (SEs that over-explain the scatter stay as they are).

The t quantile takes the dof of the variance that sets the intervals' width: n - k when the
covariance was scaled (the scatter sets it), else the dof of the loss noise the SEs came
from (``se_dof``: ``analysis.transfer.optimum.Noise.dof``; with 4 groups and 2 coefficients,
t(2) = 4.30 would widen an interval whose width the SEs fix: measured on synthetic sweeps,
100% coverage where the nominal is 95%).

- parameter intervals: β_j ± t · sqrt(Cov_jj);
- prediction interval at a new x0 (``predict``), for the optimum a new group's sweep would
  measure there: var = z0ᵀ Cov z0 (the law's uncertainty) + φ · mean(SE_g²) (the scatter of
  a measured optimum about the law, φ the scale above), the same t.

At least k + 1 groups to fit; intervals need n - k >= 2 (k + 2 groups): with one residual
dof the t quantile (12.7 at 95%) and the χ² scale are uninformative, so they are NaN and
``interval_note`` says why. Shapes: n groups, k = p + 1 coefficients.

References: DeepSeek-AI 2024 (arXiv 2401.02954) fit η_opt = 0.3118 · C^-0.125 and
B_opt = 0.292 · C^0.327 this way on their own grid; Li et al. 2025, "Predictable scale"
(Step Law, arXiv 2503.04715) fit η and B in N and D.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.errors import AnalysisInputError, TooFewPointsError

__all__ = ["MIN_DOF_INTERVAL", "TransferLaw", "fit_law_wls"]

MIN_DOF_INTERVAL = 2
"""Residual dof (n - k) an interval needs."""


@dataclass(frozen=True)
class TransferLaw:
    """hp* = exp(coef[0]) · Π x_i^coef[i].

    Fields: ``x`` the variables' names (p); ``coef`` [k] (ln c, a_1, ..., a_p); ``cov``
    [k, k] the (scaled) covariance; ``n`` groups fitted; ``chi2_red`` χ² / (n - k) of the
    weighted residuals (NaN at n = k); ``scale`` φ = max(1, chi2_red); ``mean_var`` the
    groups' mean SE² (ln-hp units); ``level`` the intervals' coverage."""

    x: tuple[str, ...]
    coef: np.ndarray
    cov: np.ndarray
    n: int
    chi2_red: float
    scale: float
    mean_var: float
    t_dof: int
    level: float = 0.95

    @property
    def dof(self) -> int:
        return self.n - len(self.coef)

    @property
    def interval_note(self) -> str | None:
        """Why there are no intervals (None when there are)."""
        if self.dof >= MIN_DOF_INTERVAL:
            return None
        return (f"{self.n} groups for {len(self.coef)} coefficients: intervals need >= "
                f"{len(self.coef) + MIN_DOF_INTERVAL} groups")

    def _t(self) -> float:
        if self.interval_note:
            return float("nan")
        return float(stats.t.ppf(0.5 + self.level / 2, self.t_dof))

    @property
    def c(self) -> float:
        return float(np.exp(self.coef[0]))

    def params(self) -> list[tuple[str, float, float, float]]:
        """(name, estimate, lo, hi): c (a ratio interval, from ln c) then each exponent."""
        t, se = self._t(), np.sqrt(np.diag(self.cov))
        out = [("c", self.c, float(np.exp(self.coef[0] - t * se[0])),
                float(np.exp(self.coef[0] + t * se[0])))]
        for i, name in enumerate(self.x, start=1):
            out.append((f"a_{name}", float(self.coef[i]), float(self.coef[i] - t * se[i]),
                        float(self.coef[i] + t * se[i])))
        return out

    def z(self, **x: float) -> np.ndarray:
        """(1, ln x_1, ..., ln x_p) [k]; every variable of the law, each > 0."""
        missing = [v for v in self.x if v not in x]
        extra = sorted(set(x) - set(self.x))
        if missing or extra:
            raise AnalysisInputError(f"predict takes {', '.join(self.x)}; got "
                                     f"{', '.join(sorted(x)) or 'nothing'}")
        vals = np.array([float(x[v]) for v in self.x])
        if not np.all(np.isfinite(vals) & (vals > 0)):
            raise AnalysisInputError(f"predict: every x must be finite and > 0, got {x}")
        return np.concatenate([[1.0], np.log(vals)])

    def predict_log(self, **x: float) -> tuple[float, float]:
        """(ln hp*, the prediction SE) at x (the SE: law and scatter, see the module)."""
        z = self.z(**x)
        var = float(z @ self.cov @ z) + self.scale * self.mean_var
        return float(z @ self.coef), float(np.sqrt(var))

    def predict(self, **x: float) -> tuple[float, float, float]:
        """(hp*, lo, hi) at x: the law and its ``level`` prediction interval (NaN ends
        without enough groups: ``interval_note``)."""
        mu, se = self.predict_log(**x)
        t = self._t()
        return float(np.exp(mu)), float(np.exp(mu - t * se)), float(np.exp(mu + t * se))


def fit_law_wls(u: np.ndarray, se: np.ndarray, X: np.ndarray, x: tuple[str, ...],
                level: float = 0.95, se_dof: int | None = None) -> TransferLaw:
    """The law from the optima ``u`` [n] (ln hp*), their ``se`` [n] and the variables
    ``X`` [n, p] (each > 0). ``se_dof``: the dof of the SEs' variance estimate (None: the
    SEs are taken as estimated with n - k dof, the conservative choice)."""
    u, se, X = np.asarray(u, float), np.asarray(se, float), np.asarray(X, float).reshape(len(u), -1)
    n, k = len(u), X.shape[1] + 1
    if n < k + 1:
        raise TooFewPointsError(n, k, f"the transfer law in {', '.join(x)}", what="groups")
    if not np.all(np.isfinite(se) & (se > 0)):
        raise AnalysisInputError("every optimum needs a finite, positive SE")
    Z = np.column_stack([np.ones(n), np.log(X)])  # [n, k]
    w = 1.0 / se**2
    A = (Z.T * w) @ Z
    if np.linalg.cond(A) > 1e12:
        raise AnalysisInputError(
            f"the groups' {', '.join(x)} values do not separate the law's exponents (the "
            "design is singular: e.g. D proportional to N at every size)")
    cov = np.linalg.inv(A)
    coef = cov @ ((Z.T * w) @ u)
    r = u - Z @ coef
    chi2_red = float(np.sum(w * r * r) / (n - k)) if n > k else float("nan")
    scale = max(1.0, chi2_red) if np.isfinite(chi2_red) else 1.0
    t_dof = n - k if scale > 1.0 or se_dof is None else max(int(se_dof), n - k)
    return TransferLaw(x=tuple(x), coef=coef, cov=cov * scale, n=n, chi2_red=chi2_red,
                       scale=scale, mean_var=float(np.mean(se**2)), t_dof=t_dof, level=level)
