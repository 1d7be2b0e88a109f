"""Synthetic sweeps with a known optimal hyperparameter, for tests and docs.

Truth: hp*(x) = c · Π x_i^a_i, and a run at (x, hp) with u = ln hp, d = u - ln hp*(x) ends at

    loss = L0(N) + k·d² + k3·d³ + ε,   L0(N) = 2 + 50 / N^0.3,   ε ~ N(0, noise²) per run,

(``k3`` != 0: an asymmetric valley, the quadratic's hard case). Its output-layer norm is
ln norm = ln norm0 + slope·d + ε_n, ε_n ~ N(0, norm_noise²): the same norm at every size's
optimum (Filatov et al.'s norm transfer, arXiv 2510.03871) when ``norm_size_slope`` = 0,
else norm0 · (N / N_min)^norm_size_slope there.

Each size's grid: ``points`` hp values spaced ``step`` apart in ln hp, centred on ln hp*
shifted by a uniform offset in ±``jitter``·step (grids are not centred on the truth).

``synthetic_joint_sweep``: a batch-size law that holds only with the lr tuned per batch
(``JointTruth``): B*(N) = c_b · N^a_b, lr*(N, B) = c_lr · N^a_lr · B^p_lr, and

    loss = L0(N) + k_b·(ln B - ln B*)² + k_lr·(ln lr - ln lr*)² + ε.

Each (N, B) cell tries ``lr_points`` lr values a factor 2 apart around a *guessed* centre
c_lr · N^a_lr · B^0.5 (the square-root rule, off the truth when p_lr != 0.5): what
``fit_transfer(..., best_over="optim.lr")`` profiles over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

__all__ = ["JointTruth", "TransferTruth", "synthetic_joint_sweep", "synthetic_sweep"]


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


@dataclass(frozen=True)
class JointTruth:
    """B* = ``c_b`` · N^``a_b``; lr* = ``c_lr`` · N^``a_lr`` · B^``p_lr``; curvatures
    ``k_b``, ``k_lr`` per ln unit; per-run loss ``noise`` (sd)."""

    c_b: float = 0.5
    a_b: float = 0.3
    c_lr: float = 0.2
    a_lr: float = -0.4
    p_lr: float = 0.35
    k_b: float = 0.04
    k_lr: float = 0.05
    noise: float = 0.003

    def b_star(self, n: np.ndarray) -> np.ndarray:
        return self.c_b * np.asarray(n, float) ** self.a_b

    def lr_star(self, n: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.c_lr * np.asarray(n, float) ** self.a_lr * np.asarray(b, float) ** self.p_lr


def synthetic_joint_sweep(truth: JointTruth, sizes: Sequence[float] | np.ndarray, *,
                          b_points: int = 7, lr_points: int = 3, jitter: float = 0.5,
                          rng: np.random.Generator | int = 0) -> pl.DataFrame:
    """A runs table (N, train.batch_size, optim.lr, final_loss, seed, run_id, state, D_total,
    D_unique, flops): per size ``b_points`` batch sizes a factor 2 apart around B* (off-centre
    by up to ±``jitter`` steps), and per batch ``lr_points`` lr values a factor 2 apart
    around the square-root guess (module docstring). One seed."""
    rng = np.random.default_rng(rng)
    step = float(np.log(2.0))
    rows = []
    for g, n in enumerate(np.asarray(sizes, float)):
        ub_star = float(np.log(truth.b_star(n)))
        centre = ub_star + rng.uniform(-jitter, jitter) * step
        for ub in centre + step * (np.arange(b_points) - (b_points - 1) / 2):
            b = float(np.exp(ub))
            ul_star = float(np.log(truth.lr_star(n, b)))
            guess = float(np.log(truth.c_lr * n ** truth.a_lr * b ** 0.5))
            for ul in guess + step * (np.arange(lr_points) - (lr_points - 1) / 2):
                loss = (2 + 50 / n ** 0.3 + truth.k_b * (ub - ub_star) ** 2
                        + truth.k_lr * (ul - ul_star) ** 2 + truth.noise * rng.normal())
                rows.append({"N": n, "train.batch_size": b, "optim.lr": float(np.exp(ul)),
                             "final_loss": loss, "seed": 0, "run_id": f"j{g}-{ub:.5f}-{ul:.5f}",
                             "state": "COMPLETED", "D_total": 20 * n, "D_unique": 20 * n,
                             "flops": 120 * n * n})
    return pl.DataFrame(rows)
