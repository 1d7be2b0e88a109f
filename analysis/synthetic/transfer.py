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


def skewed_valley(d: np.ndarray, k: float, s: float) -> np.ndarray:
    """k · 2 (e^{s d} - 1 - s d) / s²: k d² near d = 0, steeper for d > 0 when s > 0 (an lr
    that diverges above its optimum), the plain quadratic at s = 0."""
    d = np.asarray(d, float)
    if s == 0.0:
        return k * d * d
    return k * 2.0 * (np.expm1(s * d) - s * d) / (s * s)


@dataclass(frozen=True)
class LrBatchTruth:
    """An lr x batch-size study in (N, D), shaped like Step Law's (Li et al. 2025, arXiv
    2503.04715: lr* = 1.79 N^-0.713 D^0.307, B* = 0.58 D^0.571 tokens).

    lr*(N, D) = ``c`` · N^``a_n`` · D^``a_d`` at the batch optimum B*(D) = ``c_b`` ·
    D^``p_b``; at another batch the lr optimum moves as (B / B*)^``p_lr``. Loss = L0(N, D)
    + skewed_valley(ln lr - ln lr*(N, D, B), ``k_lr``, ``s_lr``) + skewed_valley(ln B -
    ln B*, ``k_b``, ``s_b``) + ε, ε ~ N(0, ``noise``²) per run; a run whose lr is more than
    ``d_div`` ln units above its batch's lr optimum diverges: ``jump`` nats more (the
    runs that make a 3-point quadratic's bottom fall far below every loss observed). The
    profiled lr optimum
    (loss minimised over B at each lr) is lr*(N, D): the truth of the law in (N, D)."""

    c: float = 1.79
    a_n: float = -0.713
    a_d: float = 0.307
    c_b: float = 0.58
    p_b: float = 0.571
    p_lr: float = 0.3
    k_lr: float = 0.05
    s_lr: float = 1.5
    k_b: float = 0.03
    s_b: float = 1.0
    d_div: float = 1.2
    jump: float = 2.0
    noise: float = 0.01

    def lr_star(self, n: np.ndarray, d: np.ndarray) -> np.ndarray:
        return self.c * np.asarray(n, float) ** self.a_n * np.asarray(d, float) ** self.a_d

    def b_star(self, d: np.ndarray) -> np.ndarray:
        return self.c_b * np.asarray(d, float) ** self.p_b


def synthetic_lr_batch_study(truth: LrBatchTruth, sizes: Sequence[float] | np.ndarray,
                             ratios: Sequence[float] = (10.0, 40.0, 160.0), *,
                             lr_points: int = 6, b_points: int = 4,
                             b_step: float = float(np.log(2.0)), b_offset: float = 0.0,
                             jitter: float = 0.5,
                             rng: np.random.Generator | int = 0) -> pl.DataFrame:
    """A runs table (N, D_total, D_unique, flops, optim.lr, train.batch_size, final_loss,
    seed, run_id, state) of an lr x batch grid per (N, D = N · ratio): ``lr_points`` lr values
    a factor 2 apart around lr*(N, D) (off-centre by up to ±``jitter`` steps), times
    ``b_points`` batch sizes ``b_step`` apart in ln B around B*(D) shifted by ``b_offset``
    steps and a uniform ±``jitter`` steps: a short batch grid whose valley is skewed
    (``LrBatchTruth.s_b``) and seldom centred. One seed."""
    rng = np.random.default_rng(rng)
    step = float(np.log(2.0))
    rows = []
    for n in np.asarray(sizes, float):
        for r in ratios:
            d = float(n * r)
            ul0 = float(np.log(truth.lr_star(n, d)))
            ub0 = float(np.log(truth.b_star(d)))
            base = 1.8 + 400.0 / n ** 0.34 + 410.0 / d ** 0.28
            ul_grid = ul0 + rng.uniform(-jitter, jitter) * step + step * (
                np.arange(lr_points) - (lr_points - 1) / 2)
            ub_grid = ub0 + (b_offset + rng.uniform(-jitter, jitter)) * b_step + b_step * (
                np.arange(b_points) - (b_points - 1) / 2)
            for ub in ub_grid:
                ul_b = ul0 + truth.p_lr * (ub - ub0)  # the lr optimum at this batch
                for ul in ul_grid:
                    loss = (base + float(skewed_valley(ul - ul_b, truth.k_lr, truth.s_lr))
                            + float(skewed_valley(ub - ub0, truth.k_b, truth.s_b))
                            + truth.jump * (ul - ul_b > truth.d_div)
                            + truth.noise * rng.normal())
                    rows.append({"N": n, "D_total": d, "D_unique": d, "flops": 6 * n * d,
                                 "optim.lr": float(np.exp(ul)),
                                 "train.batch_size": float(np.exp(ub)), "final_loss": loss,
                                 "seed": 0, "run_id": f"s{n:.0f}-{d:.0f}-{ub:.4f}-{ul:.4f}",
                                 "state": "COMPLETED"})
    return pl.DataFrame(rows)
