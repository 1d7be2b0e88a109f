"""Scaling laws with an asymptote, written in the log-space form the fitter uses.

Every law predicts ``log L`` as a log-sum-exp of terms that are linear in its internal
parameters (Besiroglu et al. 2024, arXiv 2404.10102 / Hoffmann et al. 2022, arXiv 2203.15556,
Appendix D.2):

    PowerLaw        L = A / x^alpha + E           log L = LSE(a - alpha log x, e)
    Chinchilla      L = E + A/N^alpha + B/D^beta  log L = LSE(a - alpha log N, b - beta log D, e)
    DataConstrained Chinchilla evaluated at Muennighoff's effective N', D' (arXiv 2305.16264)

with ``a, b, e = log A, log B, log E``. Parameters with a scale (A, B, E, R_D, R_N) are
fitted as logs; exponents are fitted as is. ``theta`` below is always that internal
vector, batched over starts/resamples: shape (S, P). Data columns are float64 (n,).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.errors import AnalysisInputError, did_you_mean
from analysis.laws.checks import checked_values

__all__ = ["LAW_NAMES", "Chinchilla", "DataConstrained", "Law", "PowerLaw", "get_law"]


def _lse(terms: list[np.ndarray], weights: bool = True) -> tuple[np.ndarray, list[np.ndarray]]:
    """log(sum(exp(t))) over a list of (S, n) arrays, and (with ``weights``) the softmax
    weight of each term.

    The terms are consumed (overwritten in place) to keep the hot loop allocation-light.
    """
    m = np.maximum(terms[0], terms[1])
    for t in terms[2:]:
        np.maximum(m, t, out=m)
    total = None
    for t in terms:
        np.subtract(t, m, out=t)
        np.exp(t, out=t)
        total = t.copy() if total is None else np.add(total, t, out=total)
    if weights:
        inv = np.reciprocal(total)
        for t in terms:
            np.multiply(t, inv, out=t)
    np.log(total, out=total)
    return np.add(total, m, out=total), terms


@dataclass(frozen=True)
class Law(ABC):
    """A scaling law: names, internal (log) parametrisation, start grid and bounds."""

    name: str = ""
    param_names: tuple[str, ...] = ()
    log_params: frozenset[str] = frozenset()
    grid: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Internal-space 1-D start values per parameter; the default multi-start grid is
    their Cartesian product over the free parameters."""
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Internal-space box for L-BFGS-B (wide: it exists to keep exp() finite)."""

    # ---- parameters -------------------------------------------------------------------
    @property
    def n_params(self) -> int:
        return len(self.param_names)

    def to_internal(self, params: Mapping[str, float]) -> np.ndarray:
        """Natural values (A, alpha, ...) -> internal vector (P,)."""
        self.check_names(params)
        missing = [p for p in self.param_names if p not in params]
        if missing:
            raise AnalysisInputError(f"{self.name}: missing parameters {missing}")
        return np.array([self.param_to_internal(p, params[p]) for p in self.param_names])

    def param_to_internal(self, name: str, value: float) -> float:
        value = float(value)
        if name in self.log_params:
            if not value > 0:
                raise AnalysisInputError(f"{self.name}: parameter {name} must be > 0, got {value}")
            return float(np.log(value))
        return value

    def from_internal(self, theta: np.ndarray) -> np.ndarray:
        """Internal (..., P) -> natural (..., P)."""
        out = np.array(theta, dtype=float, copy=True)
        for i, p in enumerate(self.param_names):
            if p in self.log_params:
                out[..., i] = np.exp(out[..., i])
        return out

    def as_dict(self, theta: np.ndarray) -> dict[str, float]:
        nat = self.from_internal(np.asarray(theta, dtype=float).reshape(-1))
        return {p: float(v) for p, v in zip(self.param_names, nat)}

    def check_names(self, names: Mapping[str, Any] | None) -> None:
        for key in names or {}:
            if key not in self.param_names:
                raise AnalysisInputError(
                    f"{self.name} has no parameter '{key}'{did_you_mean(key, self.param_names)}; "
                    f"it has {list(self.param_names)}"
                )

    # ---- data -------------------------------------------------------------------------
    @property
    @abstractmethod
    def columns(self) -> tuple[str, ...]:
        """The input columns the law reads (e.g. ('N', 'D'))."""

    def inputs(self, data: Any) -> dict[str, np.ndarray]:
        """The law's input columns of a polars DataFrame (or mapping) as float64 arrays."""
        cols = {}
        for c in self.columns:
            try:
                col = data[c]
            except Exception:  # polars raises ColumnNotFoundError, a mapping KeyError
                have = list(getattr(data, "columns", None) or list(data))
                raise AnalysisInputError(
                    f"{self.name} needs column '{c}'; the data has {have}"
                ) from None
            cols[c] = checked_values(c, col.to_numpy() if hasattr(col, "to_numpy") else col)
        return cols

    # ---- predictions ------------------------------------------------------------------
    @abstractmethod
    def log_predict(self, theta: np.ndarray, X: Mapping[str, np.ndarray], grad: bool = False):
        """log L for each start: theta (S, P) -> (S, n). With ``grad`` also the Jacobian as
        a list of P factors (W_p, v_p): d log L / d theta_p = W_p * v_p, where W_p is
        (S, n) and v_p is a column vector (n,) or None (= ones). The factored form lets the
        objective contract with a matrix-vector product instead of forming W_p * v_p."""

    def predict(self, params: Mapping[str, float], data: Any) -> np.ndarray:
        """Predicted loss (n,) for natural ``params`` on ``data``."""
        theta = self.to_internal(params)[None, :]
        return np.exp(self.log_predict(theta, self.inputs(data))[0])


def _grid(*values: float) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


_EXP_GRID = _grid(0.0, 0.5, 1.0, 1.5, 2.0)  # alpha, beta: Besiroglu et al. 2024's grid
_E_GRID = _grid(-1.0, -0.5, 0.0, 0.5, 1.0)  # e = log E
_AB_GRID = _grid(0.0, 5.0, 10.0, 15.0, 20.0, 25.0)  # a, b = log A, log B
_LOG_BOX = (-30.0, 60.0)
_E_BOX = (-20.0, 5.0)
_EXP_BOX = (0.0, 10.0)


@dataclass(frozen=True)
class PowerLaw(Law):
    """L = A / x^alpha + E over one column ``x`` (N, D, K, ...); Kim et al.'s A/x^B + C."""

    x: str = "N"
    name: str = "powerlaw"
    param_names: tuple[str, ...] = ("A", "alpha", "E")
    log_params: frozenset[str] = frozenset({"A", "E"})
    grid: Mapping[str, tuple[float, ...]] = field(
        default_factory=lambda: {
            "A": _grid(-10, -5, 0, 5, 10, 15, 20, 25),
            "alpha": _grid(0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
            "E": _grid(-1.0, -0.5, 0.0, 0.5, 1.0, 1.5),
        }
    )
    bounds: Mapping[str, tuple[float, float]] = field(
        default_factory=lambda: {"A": _LOG_BOX, "alpha": _EXP_BOX, "E": _E_BOX}
    )

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.x,)

    def log_predict(self, theta, X, grad=False):
        a, alpha, e = (theta[:, i : i + 1] for i in range(3))  # (S, 1) each
        logx = np.log(X[self.x])  # (n,)
        t1 = a - alpha * logx[None, :]
        lp, (w1, w2) = _lse([t1, np.repeat(e, logx.size, axis=1)])
        if not grad:
            return lp
        return lp, [(w1, None), (w1, -logx), (w2, None)]


@dataclass(frozen=True)
class Chinchilla(Law):
    """L = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022, eq. 2), D = training tokens."""

    name: str = "chinchilla"
    param_names: tuple[str, ...] = ("A", "B", "E", "alpha", "beta")
    log_params: frozenset[str] = frozenset({"A", "B", "E"})
    grid: Mapping[str, tuple[float, ...]] = field(
        default_factory=lambda: {
            "A": _AB_GRID,
            "B": _AB_GRID,
            "E": _E_GRID,
            "alpha": _EXP_GRID,
            "beta": _EXP_GRID,
        }
    )
    bounds: Mapping[str, tuple[float, float]] = field(
        default_factory=lambda: {
            "A": _LOG_BOX,
            "B": _LOG_BOX,
            "E": _E_BOX,
            "alpha": _EXP_BOX,
            "beta": _EXP_BOX,
        }
    )

    @property
    def columns(self) -> tuple[str, ...]:
        return ("N", "D")

    def log_predict(self, theta, X, grad=False):
        a, b, e, alpha, beta = (theta[:, i : i + 1] for i in range(5))  # (S, 1) each
        logN, logD = np.log(X["N"]), np.log(X["D"])  # (n,)
        t1 = a - alpha * logN[None, :]
        t2 = b - beta * logD[None, :]
        lp, (w1, w2, w3) = _lse([t1, t2, np.repeat(e, logN.size, axis=1)])
        if not grad:
            return lp
        return lp, [(w1, None), (w2, None), (w3, None), (w1, -logN), (w2, -logD)]

    @staticmethod
    def compute_optimal(params: Mapping[str, float], C) -> tuple[np.ndarray, np.ndarray]:
        """The compute-optimal (N*, D*) at compute C = 6 N D (Hoffmann et al. 2022, eq. 4):
        N* = G (C/6)^a, D* = G^-1 (C/6)^b, G = (alpha A / (beta B))^(1/(alpha+beta)),
        a = beta / (alpha+beta), b = alpha / (alpha+beta). C: a scalar or array (FLOPs)."""
        A, B, al, be = (float(params[k]) for k in ("A", "B", "alpha", "beta"))
        G = (al * A / (be * B)) ** (1.0 / (al + be))
        c6 = np.asarray(C, dtype=float) / 6.0
        return G * c6 ** (be / (al + be)), c6 ** (al / (al + be)) / G


def _saturation(
    x: np.ndarray, rho: np.ndarray, grad: bool
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Muennighoff et al.'s saturating excess q = R* (1 - e^{-x/R*}), R* = exp(rho) (S, 1),
    x >= 0 (1, n) or (S, n); with ``grad`` also e^{-y} and dq/drho = q - R* y e^{-y}, where
    y = x / R* (d/dR* [R* (1 - e^{-x/R*})] = 1 - e^{-y} (1 + y), times R* for d/drho).
    All (S, n)."""
    rstar = np.exp(rho)  # (S, 1)
    neg_y = x * (-1.0 / rstar)  # (S, n): -y
    q = np.expm1(neg_y)
    np.multiply(q, -rstar, out=q)  # R* (1 - e^{-y}), accurate for small y
    if not grad:
        return q, None, None
    e = np.exp(neg_y)
    dq = np.multiply(neg_y, e, out=neg_y)  # -y e^{-y}
    np.multiply(dq, rstar, out=dq)
    np.add(dq, q, out=dq)
    return q, e, dq


_MAX_LOG_EXCESS = 60.0
"""log(N / U_N) is capped here: beyond it R_N = N/U_N - 1 saturates N' completely
(R_N / R_N* > 1e20 for R_N* <= e^14) and exp() would overflow float32."""


@dataclass(frozen=True)
class DataConstrained(Law):
    """Muennighoff et al. 2023 (arXiv 2305.16264): L = E + A/N'^alpha + B/D'^beta with

        D' = U_D (1 + R_D* (1 - exp(-R_D / R_D*))),  R_D = D/U_D - 1
        N' = U_N (1 + R_N* (1 - exp(-R_N / R_N*))),  R_N = N/U_N - 1
        U_N = min(N_opt(U_D), N),  N_opt(U) = G (G U)^(beta/alpha),
        G = (alpha A / (beta B))^(1 / (alpha + beta))

    Columns: N (params), D (total training tokens), U (unique tokens available);
    U_D = min(U, D), so a run shorter than one epoch has D' = D.
    Parameters: the Chinchilla names plus ``R_D``, ``R_N`` (R_D*, R_N*).
    """

    name: str = "data_constrained"
    param_names: tuple[str, ...] = ("A", "B", "E", "alpha", "beta", "R_D", "R_N")
    log_params: frozenset[str] = frozenset({"A", "B", "E", "R_D", "R_N"})
    grid: Mapping[str, tuple[float, ...]] = field(
        default_factory=lambda: {
            "A": _grid(0, 5, 10, 15, 20),
            "B": _grid(0, 5, 10, 15, 20),
            "E": _grid(-0.5, 0.0, 0.5, 1.0),
            "alpha": _grid(0.25, 0.5, 1.0),
            "beta": _grid(0.25, 0.5, 1.0),
            "R_D": _grid(0.0, 1.0, 2.0, 3.0, 4.0, 5.0),
            "R_N": _grid(0.0, 1.0, 2.0, 3.0, 4.0, 5.0),
        }
    )
    bounds: Mapping[str, tuple[float, float]] = field(
        default_factory=lambda: {
            "A": _LOG_BOX,
            "B": _LOG_BOX,
            "E": _E_BOX,
            "alpha": (1e-3, 10.0),
            "beta": (1e-3, 10.0),
            "R_D": (-7.0, 14.0),
            "R_N": (-7.0, 14.0),
        }
    )

    @property
    def columns(self) -> tuple[str, ...]:
        return ("N", "D", "U")

    def log_predict(self, theta, X, grad=False):
        a, b, e, alpha, beta, rho_d, rho_n = (theta[:, i : i + 1] for i in range(7))  # (S, 1)
        N, D = X["N"][None, :], X["D"][None, :]  # (1, n)
        U = np.minimum(X["U"], X["D"])[None, :]  # U_D: unique tokens actually seen
        logN, logU = np.log(N), np.log(U)
        # Effective data D' = U_D (1 + q_D): log D' = log U_D + log1p(q_D).
        xd = np.maximum(D / U - 1.0, 0.0)  # R_D, repetitions beyond the first epoch
        q_d, _, dq_d = _saturation(xd, rho_d, grad)
        logDp = np.log1p(q_d)
        np.add(logDp, logU, out=logDp)
        # U_N = min(N_opt(U_D), N); log N_opt = (1 + k) log G + k log U, k = beta/alpha.
        s = alpha + beta
        logG = (np.log(alpha) - np.log(beta) + a - b) / s
        k = beta / alpha
        u = k * logU  # (S, n) -> log U_N
        np.add(u, (1.0 + k) * logG, out=u)
        np.minimum(u, logN, out=u)
        excess = np.minimum(logN - u, _MAX_LOG_EXCESS)  # log(N / U_N) >= 0
        x_n = np.expm1(excess)  # R_N; 0 unless N > N_opt (excess parameters)
        q_n, e_n, dq_n = _saturation(x_n, rho_n, grad)
        logNp = np.log1p(q_n)  # log N' = log U_N + log1p(q_N)
        np.add(logNp, u, out=logNp)
        t1 = logNp * -alpha
        t1 += a
        t2 = logDp * -beta
        t2 += b
        lp, (w1, w2, w3) = _lse([t1, t2, np.repeat(e, N.shape[1], axis=1)], weights=grad)
        if not grad:
            return lp
        # d log N' / d u = 1 - (N/U_N) e^{-y_N} / (1 + q_N): exactly 0 where N <= N_opt (then
        # R_N = 0, q_N = 0, e^{-y_N} = 1), so the u-terms below vanish there.
        inv_n = np.add(q_n, 1.0, out=q_n)
        np.reciprocal(inv_n, out=inv_n)  # 1 / (1 + q_N)
        dlogNp_du = np.add(x_n, 1.0, out=x_n)  # N / U_N (finite: log capped at 60)
        np.multiply(dlogNp_du, e_n, out=dlogNp_du)  # (N / U_N) e^{-y_N}
        np.multiply(dlogNp_du, inv_n, out=dlogNp_du)
        np.subtract(1.0, dlogNp_du, out=dlogNp_du)
        # d u / d(a, b, alpha, beta) through log N_opt (where capped).
        dlogG_da = 1.0 / s
        dlogG_dalpha = (1.0 / alpha - logG) / s
        dlogG_dbeta = (-1.0 / beta - logG) / s
        du_da = (1.0 + k) * dlogG_da  # (S, 1); du_db = -du_da
        c = np.multiply(dlogNp_du, w1, out=dlogNp_du)
        np.multiply(c, -alpha, out=c)  # d lp / d u (S, n)
        g_a = c * du_da
        g_b = np.subtract(w2, g_a)
        np.add(g_a, w1, out=g_a)
        # du/dalpha = (1 + k) dlogG/dalpha - (beta / alpha^2)(logG + logU), du/dbeta likewise.
        du_dalpha = logU * (-beta / alpha**2)
        du_dalpha += (1.0 + k) * dlogG_dalpha - (beta / alpha**2) * logG
        g_alpha = np.multiply(du_dalpha, c, out=du_dalpha)
        g_alpha -= w1 * logNp
        du_dbeta = logU / alpha
        du_dbeta += (1.0 + k) * dlogG_dbeta + logG / alpha
        g_beta = np.multiply(du_dbeta, c, out=du_dbeta)
        g_beta -= w2 * logDp
        g_rd = np.add(q_d, 1.0, out=q_d)  # 1 + q_D
        np.divide(dq_d, g_rd, out=g_rd)
        np.multiply(g_rd, w2, out=g_rd)
        np.multiply(g_rd, -beta, out=g_rd)  # -beta w2 dq_D / (1 + q_D)
        g_rn = np.multiply(dq_n, inv_n, out=dq_n)
        np.multiply(g_rn, w1, out=g_rn)
        np.multiply(g_rn, -alpha, out=g_rn)  # -alpha w1 dq_N / (1 + q_N)
        jac = [g_a, g_b, w3, g_alpha, g_beta, g_rd, g_rn]
        return lp, [(j, None) for j in jac]

    def n_opt(self, params: Mapping[str, float], U: np.ndarray | float) -> np.ndarray:
        """Chinchilla-optimal N for unique tokens ``U`` under this law's base parameters."""
        A, B, al, be = (float(params[k]) for k in ("A", "B", "alpha", "beta"))
        G = (al * A / (be * B)) ** (1.0 / (al + be))
        return G * (G * np.asarray(U, dtype=float)) ** (be / al)


LAW_NAMES: dict[str, type[Law]] = {
    "powerlaw": PowerLaw,
    "chinchilla": Chinchilla,
    "data_constrained": DataConstrained,
}


def get_law(law: str | Law, **options: Any) -> Law:
    """A law instance from an instance or one of ``LAW_NAMES`` (did-you-mean on a typo)."""
    if isinstance(law, Law):
        return law
    key = str(law).strip().lower().replace("-", "_")
    if key not in LAW_NAMES:
        extra = did_you_mean(key, LAW_NAMES, cutoff=0.5)
        raise AnalysisInputError(f"unknown law '{law}'{extra}; choose from {sorted(LAW_NAMES)}")
    return LAW_NAMES[key](**options)
