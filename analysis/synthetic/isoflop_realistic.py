"""Realistic synthetic isoFLOP studies: noisy, off-centre, unevenly sampled, with a known
compute-optimal exponent. The study on which approach 2's defaults are chosen
(``bench/isoflop_study.py``, docs/isoflop.md).

Loss: the Chinchilla form L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, arXiv
2203.15556, eq. 2) along D = C/(6N), whose optimum N*(C) = G (C/6)^a, a = β/(α+β)
(their eq. 4) is the truth. Unlike ``analysis.synthetic.isoflop`` (hand-written designs,
relative noise of 0.1-1%), every ingredient here is drawn from the ranges seen in
published isoFLOP sweeps (Hoffmann et al. Fig. 3: 9 budgets of ~10 runs; Porian et al.
2024, arXiv 2406.19146, sec. 2 and App. A: 4-16 budgets a factor 2 to 4 apart, model
grids fixed before the optimum is known; Besiroglu et al. 2024, arXiv 2404.10102: the
scatter of Hoffmann's points):

- the valley: α, β drawn in [0.2, 0.5] each (a = β/(α+β) from 0.29 to 0.71; α != β
  makes the isoFLOP curve asymmetric in ln N). A and B are set so that at C = 1e19 the
  optimum sits at N* = 10^8.3 (a reference point near Hoffmann's) with a reducible loss
  ``excess`` of 1.0-1.6 nats (Hoffmann's law has 1.3 there): the curvature of each
  isoFLOP curve, hence its signal against the noise, stays as in real sweeps whatever α
  and β are;
- the budgets: 4, 5, 6 or 8, log-spaced over 2 to 3.5 decades of C, the lowest in
  [1e16, 1e18], the highest up to about 6e20 (published sweeps span 2.5-3.5 decades);
- the grids: each budget is a ladder of 3 to 12 model sizes (a sweep's typical count
  drawn in 5-12, each budget within 2 of it), log-spaced by ``step`` = 0.1 to 0.3 decades
  (factors 1.26 to 2 between sizes, as in published grids), warped (denser on one side)
  and jittered; the true optimum sits at a fraction ``position`` of the way up the
  ladder, drawn per budget in [0.15, 0.85] (off-centre, lopsided, never at an end). In a
  third of the studies the ladder is one set of sizes shared by every budget (a sweep's
  fixed model sizes: the optimum falls between rungs wherever it lands);
- the noise: Gaussian, in nats, SD ``noise`` drawn log-uniformly in [0.005, 0.02] (the
  seed-to-seed spread of a final loss), heteroscedastic: the SD scales by
  10^(hetero · log10(N/N*)), hetero in [-0.3, 0.3] (a factor up to 2 per decade).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.laws.laws import Chinchilla

__all__ = ["RealisticSweep", "realistic_points", "realistic_study"]

C_REF, LOG10_N_REF = 1e19, 8.3
"""The reference point every drawn law passes through: N*(1e19) = 10^8.3 = 2e8."""


@dataclass(frozen=True)
class RealisticSweep:
    """One drawn sweep: the law, the budgets, how each budget's grid is laid out and the
    noise (the module docstring gives the ranges ``realistic_study`` draws from)."""

    name: str
    alpha: float
    beta: float
    excess: float
    budgets: tuple[float, ...]
    points: tuple[int, ...]
    position: tuple[float, ...]
    step: float
    fixed_grid: bool
    warp: float
    noise: float
    hetero: float
    seed: int
    E: float = 1.8

    @property
    def true_a(self) -> float:
        """a = β/(α+β) of N* ∝ C^a."""
        return self.beta / (self.alpha + self.beta)

    @property
    def params(self) -> dict[str, float]:
        """E, A, B, α, β of the law: the terms A/N^α and B/D^β are β/(α+β) and α/(α+β)
        of ``excess`` at the reference optimum (at an optimum α A/N^α = β B/D^β)."""
        n_ref = 10.0**LOG10_N_REF
        d_ref = C_REF / (6 * n_ref)
        s = self.alpha + self.beta
        A = self.excess * self.beta / s * n_ref**self.alpha
        B = self.excess * self.alpha / s * d_ref**self.beta
        return {"E": self.E, "A": A, "B": B, "alpha": self.alpha, "beta": self.beta}

    def n_opt(self, C) -> np.ndarray:
        """The true N*(C) (``laws.Chinchilla.compute_optimal``)."""
        return Chinchilla.compute_optimal(self.params, C)[0]


def _ladder(n: int, step: float, warp: float, rng: np.random.Generator) -> np.ndarray:
    """n log10 N from 0 to (n - 1) step, warped (s^warp: denser at the low end for
    warp > 1) and jittered by up to a quarter of a rung (the ends kept)."""
    s = np.linspace(0.0, 1.0, n) ** warp
    s[1:-1] += rng.uniform(-0.25, 0.25, n - 2) / max(n - 1, 1)
    return (n - 1) * step * np.sort(np.clip(s, 0.0, 1.0))


def realistic_points(sweep: RealisticSweep) -> pl.DataFrame:
    """The sweep's runs: columns C (the nominal budget), N, D, loss; one row per run."""
    rng = np.random.default_rng(sweep.seed)
    law = Chinchilla()
    rows = []
    centres = np.log10(sweep.n_opt(np.array(sweep.budgets)))
    shared = None
    if sweep.fixed_grid:  # one ladder of sizes from below the lowest optimum to above the top
        lo = centres[0] - 1.5 * max(sweep.points) * sweep.step
        hi = centres[-1] + 1.5 * max(sweep.points) * sweep.step
        shared = lo + _ladder(int(np.ceil((hi - lo) / sweep.step)) + 1, sweep.step,
                              sweep.warp, rng)  # fmt: skip
    for j, C in enumerate(sweep.budgets):
        n, centre = sweep.points[j], float(centres[j])
        if shared is None:
            rungs = _ladder(n, sweep.step, sweep.warp, rng)
            logn = centre - sweep.position[j] * rungs[-1] + rungs
        else:  # n consecutive shared sizes, the optimum between two of them, at about
            below = int(np.searchsorted(shared, centre)) - 1  # ``position`` up the n
            first = below - round(sweep.position[j] * (n - 2))
            logn = shared[first:first + n]
        N = 10.0**logn
        D = C / (6 * N)
        sd = sweep.noise * 10.0 ** (sweep.hetero * (logn - centre))
        loss = law.predict(sweep.params, {"N": N, "D": D}) + sd * rng.standard_normal(N.size)
        rows.append(pl.DataFrame({"C": np.full(N.size, float(C)), "N": N, "D": D, "loss": loss}))
    return pl.concat(rows)


def realistic_study(
    seed: int = 0, n: int = 24, budget_counts: tuple[int, ...] = (4, 5, 6, 8)
) -> tuple[RealisticSweep, ...]:
    """``n`` sweeps drawn from the ranges of the module docstring, reproducibly from
    ``seed`` (sweep i's own draws are seeded by 10_000 seed + i); each sweep's number of
    budgets is drawn from ``budget_counts`` (docs/isoflop.md: 8-12 as published sweeps)."""
    rng = np.random.default_rng([seed, 7919])
    out = []
    for i in range(n):
        k = int(rng.choice(list(budget_counts)))
        span = rng.uniform(2.0, 3.5)
        lo = rng.uniform(16.0, 19.0 - span / 2)
        budgets = tuple(float(c) for c in np.logspace(lo, lo + span, k))
        base = int(rng.integers(5, 13))  # a sweep's typical points per budget, 5-12
        points = tuple(int(p) for p in np.clip(base + rng.integers(-2, 3, k), 3, 12))
        out.append(RealisticSweep(
            name=f"r{seed}-{i:02d}",
            alpha=float(rng.uniform(0.2, 0.5)),
            beta=float(rng.uniform(0.2, 0.5)),
            excess=float(rng.uniform(1.0, 1.6)),
            budgets=budgets,
            points=points,
            position=tuple(float(v) for v in rng.uniform(0.15, 0.85, k)),
            step=float(np.exp(rng.uniform(np.log(0.1), np.log(0.3)))),
            fixed_grid=bool(rng.uniform() < 1 / 3),
            warp=float(np.exp(rng.uniform(-0.4, 0.4))),
            noise=float(np.exp(rng.uniform(np.log(0.005), np.log(0.02)))),
            hetero=float(rng.uniform(-0.3, 0.3)),
            seed=10_000 * seed + i,
        ))  # fmt: skip
    return tuple(out)
