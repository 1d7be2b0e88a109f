"""How far the objective may rise along a profile before a parameter value is rejected.

A profile-likelihood interval keeps the values t of one parameter whose profile objective
F_p(t) = min over the others of F stays within ``threshold`` of the optimum F(theta_hat).
For the objective F = SUM_i w_i rho(r_i) (analysis/laws/fit_objective.py) the threshold is

    threshold = kappa / 2 * q,    q = F_{1, n - P}^{-1}(level)  (= t_{n-P, (1+level)/2}^2),
    kappa = [SUM_i w_i psi_i^2 / (n - P)] / [SUM_i w_i psi'_i / SUM_i w_i],  (psi' smoothed)

with psi = rho' at the optimum's residuals, n the points of positive weight, P the free
coordinates. Why:

- Least squares (rho = r^2/2, psi' = 1): kappa = s^2, the residual variance, and
  2 (F_p - F) / s^2 is the squared profile t statistic, F(1, n - P)-distributed to first
  order (Bates & Watts 1988, "Nonlinear Regression Analysis", sec. 6.1; Venzon &
  Moolgavkar 1988, Appl. Stat. 37:87). This is exact for linear models and Gaussian errors.
- Huber (rho = Huber_delta): the drop in a rho-objective, scaled by E psi' / E psi^2, is
  asymptotically chi-square (the rho-test of Schrader & Hettmansperger 1980, Biometrika
  67:93; Huber & Ronchetti 2009, "Robust Statistics", 2nd ed., ch. 7): the local
  curvature of F is E psi' J'J while the estimate's covariance is
  (E psi^2 / E psi'^2) (J'J)^-1, so kappa = E psi^2 / E psi' turns objective units into
  the variance scale. The small-sample F quantile and n - P divisor are those of least
  squares (to which it reduces when delta exceeds every residual).
- Huber's psi' = 1{|r| <= delta} is a count of the points inside delta: with delta = 1e-3
  and log-residuals of 1e-2 only a few points are, and the count is noisy. It is smoothed:
  psi'_i is averaged over r_i +- h, i.e. the share of [r_i - h, r_i + h] inside
  [-delta, delta], with Silverman's bandwidth h = 0.9 min(sd, IQR / 1.34) n^(-1/5)
  (Silverman 1986, "Density Estimation", eq. 3.31): a kernel estimate of E psi'. The P
  residuals closest to 0 are left out of it: in the L1 limit (delta << residuals) the fit
  interpolates P points exactly (the basic solution of Koenker & Bassett 1978,
  Econometrica 46:33), so they sit inside delta by construction, not by chance; counting
  them doubled E psi' on 20 points and cut 95% intervals to 89-91% coverage.
- Measured (PowerLaw, 3 parameters, log-normal noise, 200-300 seeded draws each, every
  parameter): 95% intervals cover the truth in 94-95% of draws for least squares and in
  91-97% for Huber with delta / sigma from 0.05 to 2 (n = 12 to 40).
- Weights are read as inverse variances (weighted least squares): then kappa is again s^2;
  constant weights c scale kappa, and the threshold, by c, as they scale F.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import f as f_dist

from analysis.errors import AnalysisInputError
from analysis.laws.fit_objective import Objective

__all__ = ["Calibration", "calibrate"]


@dataclass(frozen=True)
class Calibration:
    """The profile threshold and what it was computed from (see the module docstring)."""

    threshold: float  # allowed rise of the objective: kappa / 2 * quantile
    kappa: float  # objective units -> variance scale
    quantile: float  # F_{1, dof}^{-1}(level)
    dof: int  # n - P
    level: float


def _smoothed_indicator(r: np.ndarray, delta: float) -> np.ndarray:
    """E psi'(r_i + U), U ~ uniform(-h, h): the share of [r_i - h, r_i + h] in [-delta, delta]."""
    n = r.size
    iqr = float(np.subtract(*np.percentile(r, [75, 25])))
    h = 0.9 * min(float(np.std(r, ddof=1)) if n > 1 else 0.0, iqr / 1.34) * n ** (-0.2)
    if not h > 0:
        return (np.abs(r) <= delta).astype(float)
    overlap = np.minimum(r + h, delta) - np.maximum(r - h, -delta)
    return np.clip(overlap, 0.0, None) / (2 * h)


def calibrate(obj: Objective, z: np.ndarray, level: float) -> Calibration:
    """The threshold for a profile of the fit at internal free vector ``z``."""
    if not 0 < level < 1:
        raise AnalysisInputError(f"level must be in (0, 1), got {level}")
    r = obj.residuals(z[None, :])[0]
    w = np.ones_like(r) if obj.point_weights is None else obj.point_weights
    used = w > 0
    r, w = r[used], w[used]
    dof = int(r.size - z.size)
    if dof < 1:
        raise AnalysisInputError(f"a profile needs more points than free parameters: {r.size}")
    if obj.loss == "huber":
        psi = np.clip(r, -obj.delta, obj.delta)
        rest = np.argsort(np.abs(r), kind="stable")[z.size :]  # drop the P basic residuals
        dpsi = _smoothed_indicator(r[rest], obj.delta)
        slope = float(np.sum(w[rest] * dpsi) / np.sum(w[rest]))
    else:
        psi, slope = r, 1.0
    if not slope > 0:
        raise AnalysisInputError("no residual near delta: the Huber profile has no scale")
    kappa = float(np.sum(w * psi**2) / dof) / slope
    q = float(f_dist.ppf(level, 1, dof))
    return Calibration(threshold=0.5 * kappa * q, kappa=kappa, quantile=q, dof=dof, level=level)
