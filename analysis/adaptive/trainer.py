"""A synthetic "trainer": a recipe law plus a tuning penalty plus noise, with known truth.

For a run at N parameters with tuned values t_k (e.g. epochs, weight decay):

    loss = A / x^B + E + SUM_k c_k (log2 t_k - log2 t*_k(x))^2 + sd * z,   x = N / 1e6
    mu_k(x) = lo_k + (hi_k - lo_k) (log x - log x_min) / (log x_max - log x_min)
    t*_k(x) = the value of ``grid[k]`` nearest to 2^mu_k(x) in log2 (2^mu_k without a grid)

i.e. Kim et al.'s recipe law (arXiv 2509.14786) at each size's optimum, a quadratic
penalty in log2 of every tuned value around an optimum that moves with log N from
``opt_lo`` (at the smallest size x_min) to ``opt_hi`` (at the largest, x_max) (values in
the axis' own units), and Gaussian noise of sd ``noise_sd`` per run (a seed's scatter).
The optimum snaps to the candidate grid, so every size has a best cell whose mean loss is
the law itself: the truth E is what a design that finds those cells estimates, and a
design is judged on finding them, not on the grid's resolution (off the grid, the best
cell would sit above the law by a gap that changes with N and biases every design's E).
The noise z of a run is a function of (``seed``, the run key) only, so a run's loss does
not depend on which other runs were trained or in what order: every design compared on
one trainer sees the same loss for the same run (common random numbers). FLOPs are
6 N D with D = ``unique_tokens`` x epochs (the axis named ``epochs_axis``).

The truth is E.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

__all__ = ["RecipeTrainer", "SyntheticTrainer"]


@dataclass(frozen=True)
class SyntheticTrainer:
    """Known law, penalty and noise (module docstring). Defaults: a CPU-twin-like recipe
    (losses ~2.3 at 5.6k parameters falling to ~1.99 at 271k, E = 1.95; the optimum moves
    from 64 epochs, wd 0.3 to 192 epochs, wd 8 across the twin's 5.6k..271k ladder)."""

    A: float = 0.0193
    B: float = 0.56
    E: float = 1.95
    noise_sd: float = 0.01
    curvature: Mapping[str, float] = field(default_factory=lambda: {"epochs": 0.02, "wd": 0.01})
    """c_k: nats per (log2 unit)^2 off the optimum."""
    opt_lo: Mapping[str, float] = field(default_factory=lambda: {"epochs": 64.0, "wd": 0.3})
    opt_hi: Mapping[str, float] = field(default_factory=lambda: {"epochs": 192.0, "wd": 8.0})
    x_range: tuple[float, float] = (5.6e3 / 1e6, 2.71e5 / 1e6)
    """(x_min, x_max) the optimum moves between (x = N / 1e6)."""
    grid: Mapping[str, tuple[float, ...]] | None = field(default_factory=lambda: {
        "epochs": (32.0, 64.0, 128.0, 256.0), "wd": (0.3, 1.0, 3.0, 10.0)})
    """Values the optimum snaps to per axis (the candidate grid; None: no snapping)."""
    unique_tokens: float = 32768.0
    epochs_axis: str = "epochs"
    seed: int = 0

    def law(self, N) -> np.ndarray:
        """A / x^B + E (n,): the loss at each size's continuous optimum."""
        return self.A / (np.asarray(N, dtype=float) / 1e6) ** self.B + self.E

    def penalty(self, frame: pl.DataFrame) -> np.ndarray:
        """SUM_k c_k (log2 t_k - mu_k(x))^2 (n,)."""
        x = frame["N"].to_numpy().astype(float) / 1e6
        lx0, lx1 = np.log(self.x_range[0]), np.log(self.x_range[1])
        f = (np.log(x) - lx0) / (lx1 - lx0)
        out = np.zeros(x.size)
        for name, c in self.curvature.items():
            lo, hi = np.log2(self.opt_lo[name]), np.log2(self.opt_hi[name])
            mu = lo + (hi - lo) * f  # (n,)
            if self.grid is not None and name in self.grid:
                g = np.log2(np.asarray(self.grid[name], dtype=float))  # (G,)
                mu = g[np.argmin(np.abs(mu[:, None] - g[None, :]), axis=1)]
            out += c * (np.log2(frame[name].to_numpy().astype(float)) - mu) ** 2
        return out

    def mean_loss(self, frame: pl.DataFrame) -> np.ndarray:
        """The noiseless loss of each run (n,)."""
        return self.law(frame["N"].to_numpy()) + self.penalty(frame)

    def noise(self, keys) -> np.ndarray:
        """z * noise_sd per run (n,), a function of (seed, key) alone."""
        z = [np.random.default_rng([self.seed, zlib.crc32(k.encode())]).standard_normal()
             for k in keys]
        return self.noise_sd * np.asarray(z, dtype=float)

    def loss(self, frame: pl.DataFrame) -> np.ndarray:
        """Train the runs of ``frame`` (columns key, N, the axes): their final losses (n,)."""
        return self.mean_loss(frame) + self.noise(frame["key"].to_list())

    def flops(self, frame: pl.DataFrame) -> np.ndarray:
        """6 N D, D = unique_tokens x epochs (n,)."""
        return (6.0 * frame["N"].to_numpy().astype(float) * self.unique_tokens
                * frame[self.epochs_axis].to_numpy().astype(float))

    @property
    def truth(self) -> float:
        """The recipe's asymptote E."""
        return self.E

    def train(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with its ``loss`` column (the runs trained)."""
        return frame.with_columns(pl.Series("loss", self.loss(frame)))


@dataclass(frozen=True)
class RecipeTrainer:
    """Several recipes on one candidate grid, each a slice with its own synthetic law (the
    known truth of a ranking): a run is trained by the trainer of the first slice holding
    it. ``recipes``: name -> (its slice, ``CandidateSpace.restrict``; its trainer). FLOPs
    are the first trainer's (every trainer prices a run the same way)."""

    recipes: Mapping[str, tuple]

    def _owner(self, frame: pl.DataFrame) -> np.ndarray:
        owner = np.full(frame.height, -1)
        for i, (space, _) in enumerate(self.recipes.values()):
            inside = space.contains(frame).to_numpy()
            owner = np.where((owner < 0) & inside, i, owner)
        if (owner < 0).any():
            raise ValueError(f"runs outside every recipe: {frame['key'][int(np.argmin(owner))]}")
        return owner

    def loss(self, frame: pl.DataFrame) -> np.ndarray:
        owner = self._owner(frame)
        out = np.empty(frame.height)
        for i, (_, trainer) in enumerate(self.recipes.values()):
            if (mask := owner == i).any():
                out[mask] = trainer.loss(frame.filter(pl.Series(mask)))
        return out

    def flops(self, frame: pl.DataFrame) -> np.ndarray:
        return next(iter(self.recipes.values()))[1].flops(frame)

    @property
    def truth(self) -> dict[str, float]:
        """Each recipe's asymptote E."""
        return {name: trainer.E for name, (_, trainer) in self.recipes.items()}

    def train(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(pl.Series("loss", self.loss(frame)))
