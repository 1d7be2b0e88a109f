"""The fitting objective (Besiroglu et al. 2024, arXiv 2404.10102; Hoffmann et al. 2022 D.2).

    F(theta) = SUM_i w_i * rho(log Lhat_i(theta) - log L_i)

with rho = Huber_delta (delta = 1e-3) or, for ``loss="mse"``, rho(r) = r^2 / 2 (the
delta -> infinity limit of Huber). The SUM, not the mean, matters: with a mean, L-BFGS's
relative tolerance stops it after about two iterations (Epoch's diagnosis of Hoffmann's
fit). ``w`` are integer bootstrap counts (1 for a plain fit). Everything is batched over
S parameter vectors at once (starts or resamples), with analytic gradients.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.laws import Law

__all__ = ["LOSSES", "Objective", "huber", "huber_grad"]

LOSSES = ("huber", "mse")
_CHUNK_ELEMENTS = 1 << 18  # rows * points per block: keeps (S, n) temporaries cache-sized


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    """Huber loss: r^2/2 for |r| <= delta, delta (|r| - delta/2) beyond (scipy.special.huber).

    Written as psi (r - psi/2) with psi = clip(r, -delta, delta), which is both branches."""
    psi = huber_grad(r, delta)
    return psi * (r - 0.5 * psi)


def huber_grad(r: np.ndarray, delta: float) -> np.ndarray:
    """d huber / d r = clip(r, -delta, delta)."""
    return np.clip(r, -delta, delta)


@dataclass(frozen=True)
class Objective:
    """F and dF/dtheta_free for one law on one data set, batched over rows of theta.

    ``template`` (P,) holds every internal parameter (fixed ones at their fixed values);
    ``free`` indexes the ones being fitted. ``weights`` is (n,) or (R, n) per-row counts.
    """

    law: Law
    X: Mapping[str, np.ndarray]
    logy: np.ndarray  # (n,)
    template: np.ndarray  # (P,)
    free: np.ndarray  # (P_free,) int
    loss: str = "huber"
    delta: float = 1e-3

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise AnalysisInputError(f"loss must be one of {LOSSES}, got '{self.loss}'")
        if not self.delta > 0:
            raise AnalysisInputError(f"delta must be > 0, got {self.delta}")

    def full(self, z: np.ndarray) -> np.ndarray:
        """Free vectors (S, P_free) -> full internal vectors (S, P)."""
        theta = np.broadcast_to(self.template, (z.shape[0], self.template.size)).copy()
        theta[:, self.free] = z
        return theta

    def residuals(self, z: np.ndarray) -> np.ndarray:
        """log Lhat - log L, (S, n)."""
        return self.law.log_predict(self.full(z), self.X) - self.logy[None, :]

    def _rho(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rho(r), rho'(r)), elementwise; Huber as psi (r - psi/2), psi = clip(r, +-delta)."""
        if self.loss == "huber":
            psi = huber_grad(r, self.delta)
            return psi * (r - 0.5 * psi), psi
        return 0.5 * r * r, r

    def value_and_grad(
        self, z: np.ndarray, weights: np.ndarray | None = None, grad: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """F (S,) and dF/dz (S, P_free) for free vectors z (S, P_free)."""
        z = np.atleast_2d(np.asarray(z, dtype=float))
        S, n = z.shape[0], self.logy.size
        f = np.empty(S)
        g = np.empty((S, self.free.size)) if grad else None
        step = max(1, _CHUNK_ELEMENTS // max(n, 1))
        for lo in range(0, S, step):
            hi = min(S, lo + step)
            w = None if weights is None else (weights if weights.ndim == 1 else weights[lo:hi])
            theta = self.full(z[lo:hi])
            if grad:
                lp, jac = self.law.log_predict(theta, self.X, grad=True)
            else:
                lp = self.law.log_predict(theta, self.X)
            r = np.subtract(lp, self.logy[None, :], out=lp)  # (s, n) residuals
            rho, psi = self._rho(r)
            if w is not None:
                rho, psi = rho * w, psi * w
            f[lo:hi] = rho.sum(axis=1)
            if grad:
                contracted: dict[int, np.ndarray] = {}
                for j, p in enumerate(self.free):
                    W, v = jac[p]
                    key = id(W)
                    if key not in contracted:
                        contracted[key] = np.multiply(psi, W, out=W)  # psi * dlogL factor
                    u = contracted[key]
                    g[lo:hi, j] = u.sum(axis=1) if v is None else u @ v
        return f, g
