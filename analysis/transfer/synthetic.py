"""Synthetic sweeps with a known optimal hyperparameter, for tests and docs.

Truth: hp*(x) = c · Π x_i^a_i, and a run at (x, hp) with u = ln hp, d = u - ln hp*(x) ends at

    loss = L0(N) + k·d² + k3·d³ + ε,   L0(N) = 2 + 50 / N^0.3,   ε ~ N(0, noise²) per run,

(``k3`` != 0: an asymmetric valley, the quadratic's hard case). Its output-layer norm is
ln norm = ln norm0 + slope·d + ε_n, ε_n ~ N(0, norm_noise²): the same norm at every size's
optimum (Filatov et al.'s norm transfer, arXiv 2510.03871) when ``norm_size_slope`` = 0,
else norm0 · (N / N_min)^norm_size_slope there.

Each size's grid: ``points`` hp values spaced ``step`` apart in ln hp, centred on ln hp*
shifted by a uniform offset in ±``jitter``·step (grids are not centred on the truth).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

__all__ = ["TransferTruth", "synthetic_sweep"]


@dataclass(frozen=True)
class TransferTruth:
    """The known law: ``c``, exponents ``a`` (one per x), the valley's curvature ``k`` and
    cubic ``k3`` (per ln-hp unit), per-run loss ``noise`` (sd)."""

    c: float = 3e-2
    a: tuple[float, ...] = (-0.35,)
    k: float = 0.05
    k3: float = 0.0
    noise: float = 0.003

    def hp_star(self, X: np.ndarray) -> np.ndarray:
        """hp* at ``X`` [n, p]."""
        X = np.asarray(X, float).reshape(len(X), -1)
        return self.c * np.prod(X ** np.asarray(self.a), axis=1)


def synthetic_sweep(truth: TransferTruth, sizes: Sequence[float] | np.ndarray, *,
                    x: tuple[str, ...] = ("N",), hp: str = "optim.lr", points: int = 7,
                    step: float = float(np.log(2.0)), jitter: float = 0.5, seeds: int = 1,
                    norm0: float = 30.0, norm_slope: float = 0.8, norm_noise: float = 0.01,
                    norm_size_slope: float = 0.0,
                    rng: np.random.Generator | int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, norms): a runs table (x..., hp, final_loss, seed, run_id, state; D_total and
    flops too, so it reads like runs.parquet) and norm records (run_id, step, layer, param,
    kind, norm, value) of ``lm_head`` at one final step. ``sizes``: [n] values of x
    (``x`` = ("N",), ("C",)) or [n, 2] (N, D) pairs."""
    rng = np.random.default_rng(rng)
    X = np.asarray(sizes, float).reshape(len(sizes), -1)  # [n, p]
    ustar = np.log(truth.hp_star(X))  # [n]
    n_min = X[:, 0].min()
    runs, norms = [], []
    for g in range(len(X)):
        centre = ustar[g] + rng.uniform(-jitter, jitter) * step
        grid = centre + step * (np.arange(points) - (points - 1) / 2)  # [points]
        for u in grid:
            d = u - ustar[g]
            for s in range(seeds):
                run_id = f"r{g}-{u:.6f}-{s}"
                loss = 2 + 50 / X[g, 0] ** 0.3 + truth.k * d * d + truth.k3 * d ** 3
                row = {v: float(X[g, i]) for i, v in enumerate(x)}
                N = row.get("N", X[g, 0])
                D = row.get("D", 20 * N)
                row.update({hp: float(np.exp(u)), "final_loss": loss + truth.noise * rng.normal(),
                            "seed": s, "run_id": run_id, "state": "COMPLETED", "N": N,
                            "D_total": D, "D_unique": D,
                            "flops": row.get("C", 6 * N * D)})
                row.pop("D", None)
                runs.append(row)
                ln = (np.log(norm0) + norm_size_slope * np.log(X[g, 0] / n_min) + norm_slope * d
                      + norm_noise * rng.normal())
                norms.append({"run_id": run_id, "step": 100, "layer": "lm_head", "param": "weight",
                              "kind": "weight", "norm": "rms_to_inf", "value": float(np.exp(ln))})
    return pl.DataFrame(runs), pl.DataFrame(norms)
