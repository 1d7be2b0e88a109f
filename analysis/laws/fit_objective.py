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
``normal_equations`` adds the Gauss-Newton matrix J^T diag(c) J that the fitter's
Levenberg-Marquardt steps solve with (solvers/levenberg.py), from the same per-point terms
(``_point_terms``) as F and dF; ``astype(np.float32)`` gives the float32 copy its screen
runs on (fit/fit.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.laws.laws import Law

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

    def astype(self, dtype: type) -> Objective:
        """This objective with its data (X, log L, template, weights) in ``dtype``; the fit's
        float32 screen uses it (fit/fit.py): log_predict then runs in float32 throughout."""
        w = self.point_weights
        return replace(
            self,
            X={k: np.asarray(v, dtype=dtype) for k, v in self.X.items()},
            logy=self.logy.astype(dtype),
            template=self.template.astype(dtype),
            point_weights=None if w is None else w.astype(dtype),
        )

    def _rho(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rho(r), rho'(r)), elementwise; Huber as psi (r - psi/2), psi = clip(r, +-delta)."""
        if self.loss == "huber":
            psi = huber_grad(r, self.delta)
            return psi * (r - 0.5 * psi), psi
        return 0.5 * r * r, r

    def _irls(self, r: np.ndarray) -> np.ndarray:
        """IRLS weight rho'(r) / r (s, n): 1 inside Huber's delta, delta / |r| beyond (Holland
        & Welsch 1977); 1 for MSE. It is >= rho''(r) (0 beyond delta), so the quadratic
        model it gives bounds Huber's loss from above and keeps H positive semidefinite."""
        if self.loss == "huber":
            return self.delta / np.maximum(np.abs(r), self.delta)
        return np.ones_like(r)

    def _point_terms(
        self, lp: np.ndarray, w: np.ndarray | None, curvature: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Per-point terms (s, n) of F from log Lhat ``lp`` (overwritten): w rho(r); the
        gradient weight u = w rho'(r) dr/dlogLhat (dF/dz = SUM_i u_i dlogLhat_i/dz); and with
        ``curvature`` the Gauss-Newton weight c = w IRLS(r) (dr/dlogLhat)^2."""
        if self.space == "linear":
            pred = np.exp(lp)
            r = pred - self.y[None, :]
            rho, u = self._rho(r)
            u = u * pred  # d r / d log Lhat = Lhat
            c = self._irls(r) * pred * pred if curvature else None
        else:
            r = np.subtract(lp, self.logy[None, :], out=lp)  # (s, n) residuals
            rho, u = self._rho(r)
            c = self._irls(r) if curvature else None
        if w is not None:
            rho, u = rho * w, u * w
            c = None if c is None else c * w
        return rho, u, c

    def _blocks(
        self, S: int, weights: np.ndarray | None
    ) -> Iterator[tuple[slice, np.ndarray | None]]:
        """(slice of rows, their weights (n,) or (s, n) or None) per cache-sized block; the
        user's point weights are multiplied in."""
        if self.point_weights is not None:
            weights = self.point_weights if weights is None else weights * self.point_weights
        step = max(1, _CHUNK_ELEMENTS // max(self.logy.size, 1))
        for lo in range(0, S, step):
            rows = slice(lo, min(S, lo + step))
            w = None if weights is None else (weights if weights.ndim == 1 else weights[rows])
            yield rows, w

    def _jacobian(self, jac: list[tuple[np.ndarray, np.ndarray | None]], s: int) -> np.ndarray:
        """d log Lhat / dz (s, P_free, n) from log_predict's factors (W_p, v_p); tied
        parameters add onto their shared column."""
        J = np.empty((s, self.n_free, self.logy.size), dtype=self.template.dtype)
        cols = range(self.free.size) if self.coords is None else self.coords
        seen: set[int] = set()
        for p, c in zip(self.free, cols):
            W, v = jac[p]
            if c in seen:  # a tied parameter: add onto its target's column
                J[:, c, :] += W if v is None else W * v
            elif v is None:
                J[:, c, :] = W
            else:
                np.multiply(W, v, out=J[:, c, :])
            seen.add(c)
        return J

    def value_and_grad(
        self, z: np.ndarray, weights: np.ndarray | None = None, grad: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """F (S,) and dF/dz (S, P_free) for free vectors z (S, P_free)."""
        z = np.atleast_2d(np.asarray(z, dtype=float))
        S = z.shape[0]
        f = np.empty(S)
        g = np.empty((S, self.free.size)) if grad else None
        for rows, w in self._blocks(S, weights):
            theta = self.full(z[rows])
            if grad:
                lp, jac = self.law.log_predict(theta, self.X, grad=True)
            else:
                lp = self.law.log_predict(theta, self.X)
            rho, psi, _ = self._point_terms(lp, w, curvature=False)
            f[rows] = rho.sum(axis=1)
            if grad:
                contracted: dict[int, np.ndarray] = {}
                for j, p in enumerate(self.free):
                    W, v = jac[p]
                    key = id(W)
                    if key not in contracted:
                        contracted[key] = np.multiply(psi, W, out=W)  # psi * dlogL factor
                    u = contracted[key]
                    g[rows, j] = u.sum(axis=1) if v is None else u @ v
        if grad and self.coords is not None:  # tied parameters: sum onto their shared column
            gz = np.zeros((S, self.n_free))
            for j, c in enumerate(self.coords):
                gz[:, c] += g[:, j]
            g = gz
        return f, g

    def normal_equations(
        self, z: np.ndarray, weights: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """F (S,), g = dF/dz (S, P_free) and the Gauss-Newton matrix H (S, P_free, P_free)
        of the robust least-squares problem, for Levenberg-Marquardt (solvers/levenberg.py):

            g = J^T u,   H = J^T diag(c) J,   J = d log Lhat / dz  (S, n, P_free)

        with u, c from ``_point_terms``: for MSE in log space H is Gauss-Newton's J^T J;
        for Huber, c is the IRLS weight (Holland & Welsch 1977). Returned in float64
        whatever this objective's dtype."""
        z = np.atleast_2d(np.asarray(z, dtype=float))
        S, P = z.shape[0], self.n_free
        f, g, H = np.empty(S), np.empty((S, P)), np.empty((S, P, P))
        for rows, w in self._blocks(S, weights):
            lp, jac = self.law.log_predict(self.full(z[rows]), self.X, grad=True)
            J = self._jacobian(jac, lp.shape[0])  # (s, P, n)
            rho, u, c = self._point_terms(lp, w, curvature=True)
            f[rows] = rho.sum(axis=1)
            g[rows] = np.einsum("spn,sn->sp", J, u)
            H[rows] = np.matmul(J * c[:, None, :], J.transpose(0, 2, 1))  # (s, P, P)
        return f, g, H
