"""The training-precision law: Kumar et al. 2024 ("Scaling Laws for Precision", arXiv
2411.04330) on Muennighoff et al.'s effective data (arXiv 2305.16264):

    L = A / N_eff^alpha + B / D'^beta + E
    D' = U_D (1 + R_D* (1 - exp(-R_D / R_D*))),  R_D = D / U_D - 1,  U_D = min(U, D)

with N_eff, by ``mode``:

- "gamma":       N_eff = N (1 - exp(-P / gamma))       (Kumar et al.'s training-precision form,
                 P the format's effective bits, laws/precision_bits.py);
- "multiplier":  N_eff = N m_f                          (one free m_f per format, the
                 reference's held at 1 by the fit: the non-parametric form);
- "kappa_N":     N_eff = N m_f (N / N0)^k_f             (the gap changing with N);
- "kappa_epochs": N_eff = N m_f (epochs / ep0)^k_f      (the gap changing with repetition;
                 epochs = D / U_D).

N0, ep0 are the geometric means of the study's sizes and epochs, so m_f is the multiplier at
the study's centre. D' is the data-constrained law's (laws/laws.py, ``_saturation``, the same
code); Muennighoff's excess-parameter term N' is not modelled: a precision twin's sizes sit
at or below N_opt(U), where N' = N.

Columns: N, D, U, P (effective bits) and ``fmt`` (1-based index into ``formats``). Internal
parameters as the other laws: A, B, E, R_D, gamma, m_f as logs, exponents and k_f as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.laws.laws import _E_BOX, _LOG_BOX, Law, _grid, _lse, _saturation

__all__ = ["MODES", "PrecisionLaw", "k_name", "m_name"]

MODES = ("gamma", "multiplier", "kappa_N", "kappa_epochs")
_BASE = ("A", "B", "E", "alpha", "beta", "R_D")
_M_BOX = (-7.0, 3.0)  # log m: a multiplier from 1e-3 to 20
_K_BOX = (-3.0, 3.0)
_GAMMA_BOX = (-3.0, 5.0)  # log gamma: 0.05 to 148 bits


def m_name(fmt: str) -> str:
    return f"m_{fmt}"


def k_name(fmt: str) -> str:
    return f"k_{fmt}"


@dataclass(frozen=True)
class PrecisionLaw(Law):
    """See the module docstring. ``formats``: the study's formats (the order of ``fmt``);
    ``centre``: N0 (kappa_N) or ep0 (kappa_epochs)."""

    formats: tuple[str, ...] = ()
    mode: str = "multiplier"
    centre: float = 1.0
    name: str = "precision"
    param_names: tuple[str, ...] = ()
    log_params: frozenset[str] = frozenset()
    grid: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise AnalysisInputError(f"precision law: mode must be one of {MODES}, got '{self.mode}'")
        if len(self.formats) < 1 or len(set(self.formats)) != len(self.formats):
            raise AnalysisInputError(f"precision law: formats must be distinct, got {self.formats}")
        if not self.centre > 0:
            raise AnalysisInputError(f"precision law: centre must be > 0, got {self.centre}")
        extra: tuple[str, ...] = ()
        if self.mode == "gamma":
            extra = ("gamma",)
        else:
            extra = tuple(m_name(f) for f in self.formats)
            if self.mode != "multiplier":
                extra += tuple(k_name(f) for f in self.formats)
        names = _BASE + extra
        logs = {"A", "B", "E", "R_D", "gamma"} | {m_name(f) for f in self.formats}
        grid = {
            "A": _grid(0, 5, 10, 15),
            "B": _grid(0, 5, 10, 15),
            "E": _grid(-0.5, 0.0, 0.5, 1.0),
            "alpha": _grid(0.25, 0.5, 1.0),
            "beta": _grid(0.25, 0.5, 1.0),
            "R_D": _grid(0.0, 1.5, 3.0, 4.5),
            "gamma": _grid(0.0, 0.5, 1.0, 1.5),
        }
        bounds = {"A": _LOG_BOX, "B": _LOG_BOX, "E": _E_BOX, "alpha": (1e-3, 10.0),
                  "beta": (1e-3, 10.0), "R_D": (-7.0, 14.0), "gamma": _GAMMA_BOX}
        for f in self.formats:
            grid[m_name(f)], bounds[m_name(f)] = _grid(0.0), _M_BOX
            grid[k_name(f)], bounds[k_name(f)] = _grid(0.0), _K_BOX
        object.__setattr__(self, "param_names", names)
        object.__setattr__(self, "log_params", frozenset(logs & set(names)))
        object.__setattr__(self, "grid", {p: grid[p] for p in names})
        object.__setattr__(self, "bounds", {p: bounds[p] for p in names})

    @property
    def columns(self) -> tuple[str, ...]:
        return ("N", "D", "U", "P", "fmt")

    def _covariate(self, X: Mapping[str, np.ndarray], U: np.ndarray) -> np.ndarray:
        """log(N / N0) or log(epochs / ep0), (n,)."""
        x = X["N"] if self.mode == "kappa_N" else X["D"] / U
        return np.log(x / self.centre)

    def log_predict(self, theta, X, grad=False):
        a, b, e, alpha, beta, rho_d = (theta[:, i : i + 1] for i in range(6))  # (S, 1)
        n = X["N"].size
        U = np.minimum(X["U"], X["D"])  # U_D: unique tokens actually seen
        logU = np.log(U)[None, :]
        xd = np.maximum(X["D"] / U - 1.0, 0.0)[None, :]  # repetitions beyond the first epoch
        q_d, _, dq_d = _saturation(xd, rho_d, grad)
        logDp = np.log1p(q_d)
        np.add(logDp, logU, out=logDp)  # log D'
        logN = np.log(X["N"])[None, :]
        if self.mode == "gamma":
            s = X["P"][None, :] * np.exp(-theta[:, 6:7])  # P / gamma (S, n)
            logNeff = logN + np.log(-np.expm1(-s))
            dlog = None if not grad else -s / np.expm1(s)  # d log(1 - e^-s) / d log gamma
        else:
            k_f = len(self.formats)
            idx = np.rint(X["fmt"]).astype(int) - 1
            ind = [(idx == j).astype(X["N"].dtype) for j in range(k_f)]  # (n,) each
            logm = theta[:, 6 : 6 + k_f][:, idx]  # (S, n)
            logNeff = logN + logm
            if self.mode != "multiplier":
                c = self._covariate(X, U)
                kk = theta[:, 6 + k_f : 6 + 2 * k_f][:, idx]
                logNeff = logNeff + kk * c[None, :]
        t1 = a - alpha * logNeff
        t2 = b - beta * logDp
        lp, (w1, w2, w3) = _lse([t1, t2, np.repeat(e, n, axis=1)], weights=grad)
        if not grad:
            return lp
        g_alpha = -w1 * logNeff
        g_beta = -w2 * logDp
        g_rd = -beta * w2 * dq_d / (1.0 + q_d)
        jac = [(w1, None), (w2, None), (w3, None), (g_alpha, None), (g_beta, None), (g_rd, None)]
        wa = -alpha * w1  # d lp / d log N_eff (S, n)
        if self.mode == "gamma":
            jac.append((wa * dlog, None))
            return lp, jac
        jac += [(wa, v) for v in ind]
        if self.mode != "multiplier":
            jac += [(wa, v * c) for v in ind]
        return lp, jac
