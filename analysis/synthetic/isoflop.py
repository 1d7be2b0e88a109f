"""Synthetic isoFLOP sweeps with a known compute-optimal exponent, for testing approach 2.

Loss: the Chinchilla form L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, arXiv
2203.15556, eq. 2) with D = C / (6 N). Its compute-optimal size is
N*(C) = G (C/6)^a, G = (α A / (β B))^(1/(α+β)), a = β/(α+β) (Hoffmann et al. eq. 4), so the
exponent every fit should recover is known exactly.

A ``SweepDesign`` mimics how real sweeps are laid out (Porian et al. 2024, arXiv
2406.19146, sec. 2 and App. A; Hoffmann et al. Fig. 3): a few budgets, each a grid of
model sizes over ``decades`` of N, its centre ``offset`` decades off the true optimum,
drifting by ``drift`` decades per decade of C (sweeps chosen before the optimum is known),
grid points jittered by up to ``jitter`` of a grid step (unequal spacing) and the number
of points varying per budget;
log-normal loss noise of relative SD ``noise`` (seed-to-seed spread). ``round_sizes``:
N and D perturbed by up to that relative amount (real parameter and token counts are not
the nominal ones), so C = 6 N D scatters around the nominal budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.laws.laws import Chinchilla

__all__ = ["SweepDesign", "study_designs", "sweep_points"]


@dataclass(frozen=True)
class SweepDesign:
    """One synthetic sweep: the law (alpha, beta, A, B, E), the budgets and grids."""

    name: str
    alpha: float
    beta: float
    budgets: tuple[float, ...]
    points: int = 12
    decades: float = 3.0
    offset: float = 0.0
    drift: float = 0.0
    jitter: float = 0.3
    noise: float = 0.003
    round_sizes: float = 0.0
    A: float = 406.4
    B: float = 410.7
    E: float = 1.69
    seed: int = 0

    @property
    def true_a(self) -> float:
        """a = β/(α+β) of N* ∝ C^a."""
        return self.beta / (self.alpha + self.beta)

    def n_opt(self, C) -> np.ndarray:
        """The true compute-optimal N*(C) = G (C/6)^a (``laws.Chinchilla.compute_optimal``)."""
        return Chinchilla.compute_optimal(self._params, C)[0]

    @property
    def _params(self) -> dict[str, float]:
        return {"E": self.E, "A": self.A, "B": self.B, "alpha": self.alpha, "beta": self.beta}

    def loss(self, N: np.ndarray, D: np.ndarray) -> np.ndarray:
        """The law's loss (``laws.Chinchilla``, the one definition of E + A/N^α + B/D^β)."""
        return Chinchilla().predict(self._params, {"N": N, "D": D})


def sweep_points(design: SweepDesign) -> pl.DataFrame:
    """The sweep's runs: columns C (the nominal budget), N, D, loss; one row per run."""
    rng = np.random.default_rng(design.seed)
    rows = []
    c0 = np.log10(design.budgets[0])
    for C in design.budgets:
        n = max(4, design.points + int(rng.integers(-2, 3)))  # unequal point counts
        centre = np.log10(design.n_opt(C)) + design.offset + design.drift * (np.log10(C) - c0)
        grid = centre + np.linspace(-design.decades / 2, design.decades / 2, n)
        step = design.decades / (n - 1)
        grid = grid + rng.uniform(-design.jitter, design.jitter, n) * step  # unequal
        N = 10**grid
        D = C / (6 * N)
        L = design.loss(N, D) * np.exp(design.noise * rng.standard_normal(n))
        if design.round_sizes:
            N = N * (1 + rng.uniform(-design.round_sizes, design.round_sizes, n))
            D = D * (1 + rng.uniform(-design.round_sizes, design.round_sizes, n))
        rows.append(pl.DataFrame({"C": np.full(n, float(C)), "N": N, "D": D, "loss": L}))
    return pl.concat(rows)


def study_designs(seed: int = 0) -> tuple[SweepDesign, ...]:
    """15 sweeps resembling Porian et al. 2024's configurations: exponents a from 0.33 to
    0.69 (α, β in 0.20-0.45), 4 to 8 budgets over 2-3 decades of C, 9 to 15 runs per
    budget over 2 to 3 decades of N, grid centres up to 0.7 decades off the optimum and
    drifting; five sweeps train one model grid at every budget (drift ≈ -a: the optimum
    walks from one end of the grid to the other, as in sweeps with a fixed set of model
    sizes), three have strongly asymmetric valleys (α/β = 0.44 to 2); noise 0.1% to 1%.
    ``seed`` shifts every sweep's random draws."""
    spec = [  # alpha, beta, n budgets, C lo, C hi, points, decades, offset, drift, noise
        (0.34, 0.28, 5, 1e17, 1e20, 12, 3.0, 0.0, 0.0, 0.003),
        (0.30, 0.30, 6, 1e16, 1e19, 13, 3.0, 0.3, -0.5, 0.005),  # one model grid for all C
        (0.40, 0.30, 4, 3e16, 3e18, 10, 2.5, -0.3, 0.1, 0.002),
        (0.28, 0.38, 7, 1e17, 1e20, 14, 3.0, 0.6, -0.55, 0.004),  # one model grid
        (0.45, 0.35, 5, 1e18, 1e21, 11, 2.0, -0.2, 0.0, 0.003),
        (0.20, 0.45, 8, 1e16, 1e19, 15, 3.0, 0.4, -0.15, 0.006),  # asymmetric valley
        (0.25, 0.30, 5, 1e17, 1e19, 9, 2.5, 0.0, 0.1, 0.001),
        (0.45, 0.22, 6, 3e16, 3e19, 12, 3.0, 0.4, -0.35, 0.008),  # asymmetric, fixed grid
        (0.42, 0.42, 4, 1e17, 1e20, 13, 3.0, 0.1, -0.05, 0.004),
        (0.30, 0.45, 5, 1e16, 1e18, 10, 2.0, -0.1, 0.0, 0.002),
        (0.36, 0.32, 7, 1e17, 3e19, 12, 2.5, 0.5, -0.45, 0.005),  # one model grid
        (0.22, 0.40, 6, 1e18, 1e21, 14, 3.0, -0.3, 0.0, 0.003),  # asymmetric valley
        (0.44, 0.30, 5, 1e16, 1e19, 11, 3.0, 0.2, 0.1, 0.010),
        (0.32, 0.36, 4, 3e17, 3e19, 9, 2.0, 0.0, -0.1, 0.002),
        (0.29, 0.26, 8, 1e16, 1e19, 12, 3.0, 0.7, -0.5, 0.004),  # one model grid
    ]
    out = []
    for i, (al, be, k, lo, hi, pts, dec, off, dr, nz) in enumerate(spec):
        budgets = tuple(float(c) for c in np.logspace(np.log10(lo), np.log10(hi), k))
        out.append(SweepDesign(f"s{i + 1:02d}", al, be, budgets, pts, dec, off, dr,
                               noise=nz, seed=1000 * seed + i))  # fmt: skip
    return tuple(out)
