"""Refits of a profile: the other free coordinates re-minimised with one coordinate held.

The profile objective F_p(t) = min over the others of F(theta | theta_p = t) is found by a
local minimiser (scipy L-BFGS-B), so each refit is only an upper bound of F_p(t): on a
non-convex objective (a Huber fit of the Chinchilla law, Hoffmann et al. 2022, arXiv
2203.15556; Besiroglu et al. 2024, arXiv 2404.10102) a start far from the valley can stop on
a plateau, e.g. with log A at its box bound where A / N^alpha no longer moves the fit, and
report a rise far above the true one. Every refit here therefore starts from several
points - the estimate's other coordinates, and the solutions at the profile points on
either side of t (warm starts from both sides) - and keeps the lowest objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from scipy.optimize import minimize

__all__ = ["Problem", "Refitter"]

_OPTIONS = {"ftol": 1e-13, "gtol": 1e-10, "maxiter": 5000, "maxls": 50}


class Problem(Protocol):
    """What a refit reads of an objective: ``analysis.laws.fit_objective.Objective``."""

    def value_and_grad(
        self, z: np.ndarray, weights: np.ndarray | None = None, grad: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]: ...


class Refitter:
    """Minimises ``problem`` over every coordinate but ``k`` inside the box [lo, hi]."""

    def __init__(self, problem: Problem, z_hat: np.ndarray, lo: np.ndarray, hi: np.ndarray, k: int):
        self.problem, self.k, self.size = problem, k, int(z_hat.size)
        self.others = np.array([i for i in range(self.size) if i != k], dtype=int)
        self.bounds = list(zip(lo[self.others], hi[self.others]))
        self.u_hat = np.asarray(z_hat, dtype=float)[self.others].copy()

    def full(self, t: float, u: np.ndarray) -> np.ndarray:
        z = np.empty(self.size)
        z[self.k], z[self.others] = t, u
        return z

    def _one(self, t: float, u0: np.ndarray) -> tuple[float, np.ndarray]:
        if self.others.size == 0:
            f, _ = self.problem.value_and_grad(self.full(t, u0)[None, :], grad=False)
            return float(f[0]), u0

        def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
            f, g = self.problem.value_and_grad(self.full(t, u)[None, :])
            return float(f[0]), g[0, self.others]

        res = minimize(fun, u0, jac=True, method="L-BFGS-B", bounds=self.bounds, options=_OPTIONS)
        return float(res.fun), np.asarray(res.x, dtype=float)

    def refit(self, t: float, starts: Sequence[np.ndarray]) -> tuple[float, np.ndarray]:
        """(lowest refitted F at coordinate k = t over ``starts`` and the estimate's own
        other coordinates, its minimiser). Duplicate starts are refitted once."""
        best: tuple[float, np.ndarray] | None = None
        seen: list[np.ndarray] = []
        for u0 in (self.u_hat, *starts):
            if any(np.array_equal(u0, s) for s in seen):
                continue
            seen.append(u0)
            f, u = self._one(t, u0)
            if np.isfinite(f) and (best is None or f < best[0]):
                best = (f, u)
        if best is None:
            return float("inf"), self.u_hat.copy()
        return best
