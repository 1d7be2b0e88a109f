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

from analysis.checks import checked_values
from analysis.errors import AnalysisInputError, did_you_mean

__all__ = ["LAW_NAMES", "Chinchilla", "DataConstrained", "Law", "PowerLaw", "get_law"]


def _lse(terms: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """log(sum(exp(t))) over a list of (S, n) arrays, and the softmax weight of each term.

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
    for t in terms:
        np.divide(t, total, out=t)
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


def _decay_terms(x: np.ndarray, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For R* = exp(rho): (1 - e^{-x/R*}) and d/d rho of R*(1 - e^{-x/R*}), elementwise.

    d/dR* [R*(1 - e^{-x/R*})] = 1 - e^{-y}(1 + y) with y = x/R*; times R* for d/d rho.
    """
    rstar = np.exp(rho)
    y = x / rstar
    one_minus = -np.expm1(-y)
    d_rho = rstar * (one_minus - y * np.exp(-y))
    return one_minus, d_rho


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
        # Effective data D' (depends on R_D* only).
        xd = np.maximum(D / U - 1.0, 0.0)  # R_D, repetitions beyond the first epoch
        om_d, dd_rho = _decay_terms(xd, rho_d)
        Dp = U * (1.0 + np.exp(rho_d) * om_d)  # (S, n)
        logDp = np.log(Dp)
        # U_N = min(N_opt(U_D), N); log N_opt = (1 + k) log G + k log U, k = beta/alpha.
        s = alpha + beta
        logG = (np.log(alpha) - np.log(beta) + a - b) / s
        k = beta / alpha
        log_nopt = (1.0 + k) * logG + k * logU  # (S, n)
        capped = log_nopt < logN  # U_N = N_opt < N: excess parameters
        u = np.where(capped, log_nopt, logN)
        xn = np.exp(logN - u) - 1.0  # R_N >= 0
        om_n, dn_rho = _decay_terms(xn, rho_n)
        Np = np.exp(u) * (1.0 + np.exp(rho_n) * om_n)
        logNp = np.log(Np)
        lp, (w1, w2, w3) = _lse(
            [a - alpha * logNp, b - beta * logDp, np.repeat(e, logNp.shape[1], axis=1)]
        )
        if not grad:
            return lp
        # d log N' / d u (only where capped): 1 - N e^{-R_N/R_N*} / N'.
        dlogNp_du = np.where(capped, 1.0 - N * np.exp(-xn / np.exp(rho_n)) / Np, 0.0)
        # d u / d(a, b, alpha, beta) through log N_opt.
        dlogG_da = 1.0 / s
        dlogG_dalpha = (1.0 / alpha - logG) / s
        dlogG_dbeta = (-1.0 / beta - logG) / s
        du_da = (1.0 + k) * dlogG_da
        du_db = -du_da
        du_dalpha = (1.0 + k) * dlogG_dalpha - (beta / alpha**2) * (logG + logU)
        du_dbeta = (1.0 + k) * dlogG_dbeta + (logG + logU) / alpha
        c = -alpha * w1 * dlogNp_du  # d lp / d u
        g_a = w1 + c * du_da
        g_b = w2 + c * du_db
        g_alpha = -w1 * logNp + c * du_dalpha
        g_beta = -w2 * logDp + c * du_dbeta
        g_rd = -beta * w2 * (U * dd_rho / Dp)
        g_rn = -alpha * w1 * (np.exp(u) * dn_rho / Np)
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
