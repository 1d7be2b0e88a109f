"""The planning posterior of the law and the expected CI width of E under a design.

Linearised (Laplace) posterior of theta = (A, B, E) around a planning point theta_p, a
locally optimal design (Chernoff 1953, "Locally optimal designs for estimating
parameters", Ann. Math. Statist. 24, 586-602) with a weak prior (Chaloner & Verdinelli 1995, "Bayesian experimental
design: a review", Statist. Sci. 10, 273-304; Atkinson, Donev & Tobias 2007, "Optimum
Experimental Designs, with SAS", Oxford, the chapters on c-optimality, nonlinear models and
Bayesian designs):

    Lambda(design) = SUM_i w_i j_i j_i^T / s^2 + P0,     V = Lambda^-1            (3, 3)

over the design's size points i (x_i, weight w_i = seed replicates of the point),
j_i = dL/dtheta at x_i (``law.jacobian``, at theta_p), s^2 one run's noise variance, P0 a
weak prior precision diag(1/A_p^2, 1, 1) (A within 100%, B and E within 1 of theta_p) that
only makes designs with fewer than 3 sizes comparable; it is negligible next to any
identified fit. A run's information is J J^T / s^2 whatever its outcome, so the posterior
variance after a proposed run is known before the run: adding a point with weight w at x
is the rank-one update (Sherman-Morrison)

    V' = V - w V j j^T V / (s^2 + w j^T V j),
    Var'(E) = V_EE - w (V j)_E^2 / (s^2 + w j^T V j),

the c-optimality criterion for c = e_E (the variance of one linear combination of the
parameters; Atkinson et al.). The target's width is judged as the study reports it
(target_fits.py, the report's interval): 2 t_{nu, (1+level)/2} sqrt(V_EE), nu = n - 3 sizes'
residual degrees of freedom, floored at 1, so a run that adds a size also shrinks t (a
replicate adds weight, not a degree of freedom).

theta_p: the weighted fit of every size's current best cell when >= MIN_SIZES sizes have runs
(settled or not: the planning point, not the target); with 2-3 sizes, B = ``guess_B``
and (A, E) by weighted linear least squares; with fewer, A = 1, B = ``guess_B``, E = the
mean loss. s^2, the planner's guess of one run's noise variance: the law's weighted
residuals on the settled sizes (n - 3 dof) pooled with the replicate scatter within every
cell ("pure error", SUM (m_c - 1) dof; Draper & Smith 1998, "Applied Regression Analysis",
sec. 2.1), shrunk towards a prior guess sigma_0 with nu_0 = 2 pseudo degrees of freedom,
s^2 = (nu_0 sigma_0^2 + SS) / (nu_0 + nu) (the conjugate scaled inverse-chi^2 prior;
Gelman et al. 2013, "Bayesian Data Analysis", ch. 2-3). It only ranks designs: the reported
interval's s^2 is the report's (residuals alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.adaptive.law import fit_points
from analysis.adaptive.target_fits import SizePoints
from analysis.fit.identified import MIN_SIZES
from analysis.fit.power_law import SCALE, jacobian

__all__ = ["Design", "Posterior", "planning_posterior"]

PRIOR_DOF = 2.0
GUESS_B = 0.5


@dataclass(frozen=True)
class Design:
    """Size points: x (n,) and weights w (n,), the seeds of each point."""

    x: np.ndarray
    w: np.ndarray

    def add(self, x: float, w: float = 1.0) -> Design:
        """This design with weight ``w`` more at ``x`` (a new point, or a replicate of one)."""
        i = np.flatnonzero(np.isclose(self.x, x, rtol=1e-12, atol=0.0))
        if i.size:
            w_new = self.w.copy()
            w_new[i[0]] += w
            return Design(self.x, w_new)
        return Design(np.append(self.x, x), np.append(self.w, w))

    @property
    def dof(self) -> int:
        """The reported interval's degrees of freedom, n - 3 (module docstring)."""
        return max(self.x.size - 3, 0)


@dataclass(frozen=True)
class Posterior:
    """theta_p = (A, B, E), s^2 and the prior precision P0 (module docstring)."""

    theta: tuple[float, float, float]
    s2: float
    prior: np.ndarray  # (3, 3)
    level: float = 0.95
    studentized: bool = True
    """True: judge 2 t_nu sqrt(Var E) (the reported width); False: 2 z sqrt(Var E), the
    plain c-criterion (variance), blind to degrees of freedom."""

    def cov(self, design: Design) -> np.ndarray:
        """V = (SUM w j j^T / s^2 + P0)^-1 (3, 3)."""
        A, B, _ = self.theta
        J = jacobian(A, B, design.x)  # (n, 3)
        return np.linalg.inv(J.T @ (design.w[:, None] * J) / self.s2 + self.prior)

    def var_after(self, V: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Var(E) after adding weight w (k,) at x (k,) to a design with covariance V:
        the Sherman-Morrison update (k,)."""
        A, B, _ = self.theta
        j = jacobian(A, B, x)  # (k, 3)
        Vj = j @ V  # (k, 3), V symmetric
        quad = np.einsum("kp,kp->k", Vj, j)
        return V[2, 2] - w * Vj[:, 2] ** 2 / (self.s2 + w * quad)

    def width(self, var_e, dof) -> np.ndarray:
        """2 t_{max(dof, 1)} sqrt(Var(E)), elementwise."""
        if self.studentized:
            t = stats.t.ppf(0.5 + self.level / 2, np.maximum(np.asarray(dof, dtype=float), 1.0))
        else:
            t = stats.norm.ppf(0.5 + self.level / 2)
        return 2.0 * t * np.sqrt(np.maximum(np.asarray(var_e, dtype=float), 0.0))


def _theta(points: SizePoints, guess_B: float) -> tuple[float, float, float]:
    f = points.frame
    x, y, m = f["N"].to_numpy() / SCALE, f["loss"].to_numpy(), f["m"].to_numpy().astype(float)
    if x.size >= MIN_SIZES:
        return fit_points(x, y, m)
    if x.size >= 2:
        X = np.stack([x ** -guess_B, np.ones_like(x)], axis=1)
        sw = np.sqrt(m)
        (A, E), *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
        return (float(abs(A)) or 1.0, guess_B, float(E))
    return (1.0, guess_B, float(y.mean()) if y.size else 2.0)


def planning_posterior(points: SizePoints, *, noise_sd: float = 0.02, level: float = 0.95,
                       guess_B: float = GUESS_B, studentized: bool = True) -> Posterior:
    """theta_p, s^2 and P0 from the size points (module docstring); ``noise_sd`` is the
    prior guess sigma_0 of one run's noise sd."""
    A, B, E = _theta(points, guess_B)
    ss, dof = points.within_ss, points.within_dof
    if points.settled.height >= MIN_SIZES:  # the law's residuals on the settled sizes
        p = points.settled_points()
        a, b, e = fit_points(p.x, p.y, p.m)
        ss += float(np.sum(p.m * (p.y - (a * p.x**-b + e)) ** 2))
        dof += p.n - 3
    s2 = (PRIOR_DOF * noise_sd**2 + ss) / (PRIOR_DOF + dof)
    A = A if math.isfinite(A) and A > 0 else 1.0
    prior = np.diag([1.0 / A**2, 1.0, 1.0])
    return Posterior((A, B, E), float(s2), prior, level, studentized)
