"""Compute-optimal allocation (Hoffmann et al. 2022, arXiv 2203.15556) under the laws of
``laws``: N_opt = G (C/6)^a, D_opt = (C/6)^b / G with G = (alpha A / (beta B))^(1/(alpha+beta)),
a = beta/(alpha+beta), b = alpha/(alpha+beta) (``Chinchilla.compute_optimal``, the one closed
form); the DataConstrained law (Muennighoff et al. 2023) has no closed form, so it is
minimised over N along D = C/(6N) for a unique-token budget U (1-D bounded search in log N).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy import optimize

from analysis.laws.laws import Chinchilla, DataConstrained

__all__ = ["compute_optimal", "compute_optimal_constrained"]


def compute_optimal(params: Mapping[str, float], C) -> tuple[np.ndarray, np.ndarray]:
    """Chinchilla-optimal (N_opt, D_opt) at compute C (FLOPs, C = 6 N D):
    ``laws.Chinchilla.compute_optimal``, the one closed form."""
    return Chinchilla.compute_optimal(params, C)


def compute_optimal_constrained(
    params: Mapping[str, float], C: float, U: float
) -> tuple[float, float]:
    """(N, D) minimising the DataConstrained law at compute C with U unique tokens."""
    law = DataConstrained()

    def loss(logn: float) -> float:
        n = np.exp(logn)
        return float(law.predict(params, {"N": [n], "D": [C / (6 * n)], "U": [U]})[0])

    lo, hi = np.log(1e3), np.log(C / 6.0 / 1e3)
    grid = np.linspace(lo, hi, 200)
    i = int(np.argmin([loss(g) for g in grid]))
    res = optimize.minimize_scalar(
        loss,
        bounds=(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]),
        method="bounded",
        options={"xatol": 1e-10},
    )
    n = float(np.exp(res.x))
    return n, C / (6.0 * n)
