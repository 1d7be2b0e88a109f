"""Synthetic fits whose profile is known, for tests/analysis/test_profile_*.py.

Each is a duck-typed ``analysis.fit.profile.Fitted``: a problem with residuals r(z) (S, n)
and F = SUM_i rho(r_i) (rho = r^2/2, or Huber), the optimum z_hat and a box.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from analysis.laws.fit_objective import huber, huber_grad

# residuals (S, P) -> ((S, n) residuals, (S, n, P) Jacobian)
Residuals = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class _Law:
    name: str
    log_params: tuple[str, ...] = ()


@dataclass(frozen=True)
class Problem:
    res: Residuals
    loss: str = "mse"
    delta: float = 1.0
    point_weights: np.ndarray | None = None

    def residuals(self, z: np.ndarray) -> np.ndarray:
        return self.res(np.atleast_2d(z))[0]

    def _rho(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.loss == "huber":
            return huber(r, self.delta), huber_grad(r, self.delta)
        return 0.5 * r**2, r

    def value_and_grad(self, z, weights=None, grad=True):
        r, J = self.res(np.atleast_2d(np.asarray(z, dtype=float)))
        rho, psi = self._rho(r)
        return rho.sum(axis=1), (np.einsum("sn,snp->sp", psi, J) if grad else None)


@dataclass(frozen=True)
class Fit:
    free: tuple[str, ...]
    problem: Problem
    z: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    fixed: dict[str, float] = field(default_factory=dict)
    tied: dict[str, str] = field(default_factory=dict)
    law: _Law = _Law("synthetic")

    @property
    def objective(self) -> float:
        return float(self.problem.value_and_grad(self.z[None, :], grad=False)[0][0])


def _polished(problem: Problem, z0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    def fun(z):
        f, g = problem.value_and_grad(z[None, :])
        return float(f[0]), g[0]

    opts = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000}
    return minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=list(zip(lo, hi)), options=opts).x


def linear(x: np.ndarray, y: np.ndarray, loss: str = "mse", delta: float = 1.0) -> Fit:
    """y = a + b x; least squares (exact optimum) or Huber (optimum polished from it)."""
    X = np.column_stack([np.ones_like(x), x])

    def res(z):
        return z @ X.T - y[None, :], np.broadcast_to(X, (z.shape[0], *X.shape))

    problem = Problem(res, loss, delta)
    z = np.linalg.lstsq(X, y, rcond=None)[0]
    lo, hi = np.array([-50.0, -50.0]), np.array([50.0, 50.0])
    if loss == "huber":
        z = _polished(problem, z, lo, hi)
    return Fit(("a", "b"), problem, z, lo, hi)


def banana(k1: float, k2: float, noise: np.ndarray) -> Fit:
    """Rosenbrock-like valley b = a^2: residuals (noise, k1 (b - a^2), k2 (a - 1)); the
    ``noise`` residuals do not depend on (a, b) and set the threshold's scale."""

    def res(z):
        a, b = z[:, 0], z[:, 1]
        S = z.shape[0]
        r = np.column_stack([np.broadcast_to(noise, (S, noise.size)), k1 * (b - a**2), k2 * (a - 1)])
        J = np.zeros((S, noise.size + 2, 2))
        J[:, -2, 0], J[:, -2, 1], J[:, -1, 0] = -2 * k1 * a, k1, k2
        return r, J

    lo, hi = np.array([-5.0, -5.0]), np.array([5.0, 5.0])
    return Fit(("a", "b"), Problem(res), np.array([1.0, 1.0]), lo, hi)


def banana_profile_b(b: float, k1: float, k2: float) -> float:
    """Exact rise of the banana's profile of b: min over a of [k1^2 (b - a^2)^2 +
    k2^2 (a - 1)^2] / 2, at the real roots of its derivative (a cubic in a)."""
    roots = np.roots([4 * k1**2, 0.0, 2 * k2**2 - 4 * k1**2 * b, -2 * k2**2])
    a = roots[np.abs(roots.imag) < 1e-9].real
    return float(np.min(0.5 * (k1**2 * (b - a**2) ** 2 + k2**2 * (a - 1) ** 2)))
