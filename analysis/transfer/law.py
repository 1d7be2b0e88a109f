"""The transfer law hp* = c · Π x_i^a_i, fitted to the groups' optima, and its intervals.

Random-effects weighted least squares of u*_g = ln hp*_g on z_g = (1, ln x_1, ..., ln x_p):
weights w_g = 1 / (SE_g² + τ²), β = (ZᵀWZ)⁻¹ ZᵀWu, covariance (ZᵀWZ)⁻¹. τ² is the scatter of
the optima about the law that their SEs do not explain (a skewed valley, a profiled loss, a
grid that misses the bottom), chosen so that the weighted residuals' χ² equals its dof
n - k (Paule & Mandel 1982, J. Res. NBS 87:377; the meta-regression form of DerSimonian &
Laird 1986, Controlled Clinical Trials 7:177), 0 when the SEs already explain the scatter.

Why not the Birge ratio (the covariance times χ² / (n - k), the weights left as 1 / SE²),
used before 2026-11-28: it widens the intervals but keeps the weights, so one or two groups
with a tiny SE (a quadratic whose bottom was pulled far below every observed loss by a
diverged run: SE 0.0004 in ln lr on a published lr x batch study) set the law alone; there
χ² / dof was 278, the exponent in N -2.86 where the study's own bootstrap says -0.71, and
the 95% interval of a prediction spanned 6.6e-6 to 19. With τ² every weight is at most
1 / τ², so no group outweighs the scatter of the others.

The t quantile takes the dof of the variance that sets the intervals' width: n - k when τ²
> 0 (the scatter sets it; Knapp & Hartung 2003, Stat. Med. 22:2693, for meta-regression),
else the dof of the loss noise the SEs came from (``se_dof``:
``analysis.transfer.optimum.Noise.dof``; with 4 groups and 2 coefficients, t(2) = 4.30
would widen an interval whose width the SEs fix: measured on synthetic sweeps, 100%
coverage where the nominal is 95%).

- parameter intervals: β_j ± t · sqrt(Cov_jj);
- prediction interval at a new x0 (``predict``), for the optimum a new group's sweep would
  measure there: var = z0ᵀ Cov z0 (the law's uncertainty) + mean(SE_g²) + τ² (the scatter
  of a measured optimum about the law), the same t.

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
    [k, k] the covariance; ``n`` groups fitted; ``chi2_red`` χ² / (n - k) of the residuals
    weighted by 1 / SE² alone (NaN at n = k; > 1: scatter the SEs do not explain);
    ``tau2`` τ², the extra scatter (ln-hp units², 0 when chi2_red <= 1); ``mean_var`` the
    groups' mean SE²; ``max_weight`` the largest group's share of the total weight (1 / n
    when equal); ``level`` the intervals' coverage."""

    x: tuple[str, ...]
    coef: np.ndarray
    cov: np.ndarray
    n: int
    chi2_red: float
    tau2: float
    mean_var: float
    t_dof: int
    max_weight: float
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
        var = float(z @ self.cov @ z) + self.mean_var + self.tau2
        return float(z @ self.coef), float(np.sqrt(var))

    def predict(self, **x: float) -> tuple[float, float, float]:
        """(hp*, lo, hi) at x: the law and its ``level`` prediction interval (NaN ends
        without enough groups: ``interval_note``)."""
        mu, se = self.predict_log(**x)
        t = self._t()
        return float(np.exp(mu)), float(np.exp(mu - t * se)), float(np.exp(mu + t * se))


def _wls(u: np.ndarray, var: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(coef [k], cov [k, k], χ² = Σ r² / var) of the weighted least squares of ``u`` on ``Z``."""
    w = 1.0 / var
    cov = np.linalg.inv((Z.T * w) @ Z)
    coef = cov @ ((Z.T * w) @ u)
    r = u - Z @ coef
    return coef, cov, float(np.sum(w * r * r))


def paule_mandel_tau2(u: np.ndarray, se: np.ndarray, Z: np.ndarray) -> float:
    """τ² >= 0 with χ²(τ²) = Σ (u - Zβ(τ²))² / (SE² + τ²) = n - k (Paule & Mandel 1982);
    0 when χ²(0) <= n - k. χ²(τ²) falls monotonically in τ², so bisection in log τ²."""
    n, k = Z.shape
    target = n - k
    if target <= 0 or _wls(u, se**2, Z)[2] <= target:
        return 0.0
    hi = float(np.var(u)) + float(np.max(se**2)) + 1e-12
    while _wls(u, se**2 + hi, Z)[2] > target:
        hi *= 4.0
    lo = hi * 1e-12
    for _ in range(200):
        mid = float(np.sqrt(lo * hi))
        if _wls(u, se**2 + mid, Z)[2] > target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return hi


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
    if np.linalg.cond(Z.T @ Z) > 1e12:  # the design alone (weights cannot separate it)
        raise AnalysisInputError(
            f"the groups' {', '.join(x)} values do not separate the law's exponents (the "
            "design is singular: e.g. D proportional to N at every size)")
    chi2 = _wls(u, se**2, Z)[2]
    chi2_red = chi2 / (n - k) if n > k else float("nan")
    tau2 = paule_mandel_tau2(u, se, Z)
    coef, cov, _ = _wls(u, se**2 + tau2, Z)
    w = 1.0 / (se**2 + tau2)
    t_dof = n - k if tau2 > 0 or se_dof is None else max(int(se_dof), n - k)
    return TransferLaw(x=tuple(x), coef=coef, cov=cov, n=n, chi2_red=chi2_red, tau2=tau2,
                       mean_var=float(np.mean(se**2)), t_dof=t_dof,
                       max_weight=float(np.max(w) / np.sum(w)), level=level)
