"""The fitting objective (Besiroglu et al. 2024, arXiv 2404.10102; Hoffmann et al. 2022 D.2).

    F(theta) = SUM_i c_i * w_i * rho(r_i(theta)),
    r_i = log Lhat_i - log L_i   (space="log", the default)   or   Lhat_i - L_i   ("linear")

with rho = Huber_delta (delta = 1e-3, in the residual's own units) or, for ``loss="mse"``,
rho(r) = r^2 / 2 (the delta -> infinity limit of Huber). The SUM, not the mean, matters:
with a mean, L-BFGS's relative tolerance stops it after about two iterations (Epoch's
diagnosis of Hoffmann's fit). ``c`` are integer bootstrap counts (1 for a plain fit) and
``w`` the user's per-point weights (1 when none are given; Porian et al. 2024, arXiv
2406.19146, weight their fits per point). Tied parameters (Muennighoff et al. 2023,
arXiv 2305.16264, fit alpha = beta) share one free coordinate: ``coords`` maps each
varied parameter to its column of z, and dF/dz sums the tied parameters' derivatives.
Everything is batched over S parameter vectors at once (starts or resamples), with
analytic gradients; in linear space d r / d theta = Lhat * d log Lhat / d theta.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.laws import Law

__all__ = ["LOSSES", "SPACES", "Objective", "huber", "huber_grad"]

LOSSES = ("huber", "mse")
SPACES = ("log", "linear")
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
    ``free`` indexes the ones being varied; ``coords`` (len(free),) gives the column of z
    each of them reads (None: one column each, in order; tied parameters share a column).
    ``point_weights`` (n,) are the user's per-point weights (None: all 1); the
    ``weights`` argument of ``value_and_grad`` are (n,) or (R, n) per-row bootstrap counts,
    multiplied with them.
    """

    law: Law
    X: Mapping[str, np.ndarray]
    logy: np.ndarray  # (n,)
    template: np.ndarray  # (P,)
    free: np.ndarray  # (P_free,) int
    loss: str = "huber"
    delta: float = 1e-3
    space: str = "log"
    point_weights: np.ndarray | None = None  # (n,) >= 0
    coords: np.ndarray | None = None  # (len(free),) int

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise AnalysisInputError(f"loss must be one of {LOSSES}, got '{self.loss}'")
        if self.space not in SPACES:
            raise AnalysisInputError(f"space must be one of {SPACES}, got '{self.space}'")
        if not self.delta > 0:
            raise AnalysisInputError(f"delta must be > 0, got {self.delta}")

    @property
    def n_free(self) -> int:
        """Columns of z: the free coordinates (tied parameters count once)."""
        return int(self.free.size if self.coords is None else self.coords.max(initial=-1) + 1)

    @cached_property
    def y(self) -> np.ndarray:
        """Observed losses (n,), for linear-space residuals."""
        return np.exp(self.logy)

    def full(self, z: np.ndarray) -> np.ndarray:
        """Free vectors (S, P_free) -> full internal vectors (S, P)."""
        theta = np.broadcast_to(self.template, (z.shape[0], self.template.size)).copy()
        theta[:, self.free] = z if self.coords is None else z[:, self.coords]
        return theta

    def residuals(self, z: np.ndarray) -> np.ndarray:
        """The fit's residuals (S, n): log Lhat - log L, or Lhat - L in linear space."""
        lp = self.law.log_predict(self.full(z), self.X)
        if self.space == "linear":
            return np.exp(lp) - self.y[None, :]
        return lp - self.logy[None, :]

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
        if self.point_weights is not None:
            weights = self.point_weights if weights is None else weights * self.point_weights
        step = max(1, _CHUNK_ELEMENTS // max(n, 1))
        for lo in range(0, S, step):
            hi = min(S, lo + step)
            w = None if weights is None else (weights if weights.ndim == 1 else weights[lo:hi])
            theta = self.full(z[lo:hi])
            if grad:
                lp, jac = self.law.log_predict(theta, self.X, grad=True)
            else:
                lp = self.law.log_predict(theta, self.X)
            if self.space == "linear":
                pred = np.exp(lp)
                rho, psi = self._rho(pred - self.y[None, :])
                psi = psi * pred  # d r / d log Lhat = Lhat
            else:
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
        if grad and self.coords is not None:  # tied parameters: sum onto their shared column
            gz = np.zeros((S, self.n_free))
            for j, c in enumerate(self.coords):
                gz[:, c] += g[:, j]
            g = gz
        return f, g
