"""Nonparametric bootstrap of a fit: resample points with replacement, refit, summarise.

Procedure (the resampling Epoch used for its SEs: Besiroglu et al. 2024, arXiv 2404.10102):
- all ``n`` resamples are drawn up front from ``numpy.random.default_rng(seed)`` as
  index draws turned into per-point counts (n, n_points), so the result depends on the
  seed only, never on the number of workers;
- each resample is refitted by minimising the count-weighted objective (identical to
  fitting the resampled rows) with the batched L-BFGS of multistart.py, started at the
  full-data optimum, fixed parameters held fixed (for a two-stage fit: the base law);
  a fit's own per-point weights, ties, residual space and loss come with its objective
  (objective.py), so a resampled point keeps its weight (count x weight);
- resamples are split into ``workers`` contiguous chunks refitted on a thread pool: numpy
  releases the GIL inside its array kernels, which is where the time goes, and threads
  need no picklable state, no ``if __name__ == "__main__"`` guard in notebooks and no
  fork of a process that has polars' thread pool running; ``workers=1`` runs inline;
- SE = sample standard deviation (ddof=1) of each natural parameter; CIs are percentile
  intervals.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.multistart import lbfgs_batched
from analysis.objective import Objective

__all__ = ["BootstrapResult", "bootstrap_fit"]


@dataclass(frozen=True)
class BootstrapResult:
    """Refitted parameters of each resample, natural values: ``samples`` (n, P)."""

    param_names: tuple[str, ...]
    samples: np.ndarray
    seed: int
    converged: float  # fraction of resamples whose refit met its tolerance

    @property
    def n(self) -> int:
        return int(self.samples.shape[0])

    @property
    def se(self) -> dict[str, float]:
        sd = np.std(self.samples, axis=0, ddof=1)
        return {p: float(v) for p, v in zip(self.param_names, sd)}

    def ci(self, level: float = 0.95) -> dict[str, tuple[float, float]]:
        """Percentile interval per parameter."""
        if not 0 < level < 1:
            raise AnalysisInputError(f"level must be in (0, 1), got {level}")
        q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
        lo, hi = np.percentile(self.samples, q, axis=0)
        return {p: (float(a), float(b)) for p, a, b in zip(self.param_names, lo, hi)}

    def column(self, name: str) -> np.ndarray:
        return self.samples[:, self.param_names.index(name)]


def _refit_chunk(obj: Objective, z_hat: np.ndarray, lo, hi, counts: np.ndarray):
    """Refit each row of ``counts`` (k, n_points) from z_hat; returns (z (k, P_free), ok)."""
    z0 = np.repeat(z_hat[None, :], counts.shape[0], axis=0)

    def fg(z, rows):
        return obj.value_and_grad(z, weights=counts[rows])

    res = lbfgs_batched(fg, z0, lo, hi, maxiter=2000, gtol=1e-10, ftol=1e-13)
    return res.x, res.converged


def bootstrap_fit(
    fit, *, n: int = 1000, seed: int = 0, workers: int | None = None
) -> BootstrapResult:
    """Bootstrap ``fit`` (a FitResult) with ``n`` seeded resamples over ``workers`` threads
    (default: the number of CPUs)."""
    if n < 2:
        raise AnalysisInputError(f"bootstrap needs n >= 2 resamples, got {n}")
    obj: Objective = fit.problem
    m = fit.n_points
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, m, size=(n, m))
    counts = np.zeros((n, m))
    np.add.at(counts, (np.repeat(np.arange(n), m), draws.ravel()), 1.0)
    workers = max(1, min(int(workers or os.cpu_count() or 1), n))
    if fit.z.size == 0:
        z, ok = np.zeros((n, 0)), np.ones(n, dtype=bool)
    elif workers == 1:
        z, ok = _refit_chunk(obj, fit.z, fit.lo, fit.hi, counts)
    else:
        chunks = np.array_split(np.arange(n), workers)
        with ThreadPoolExecutor(workers) as pool:
            futs = [
                pool.submit(_refit_chunk, obj, fit.z, fit.lo, fit.hi, counts[c]) for c in chunks
            ]
            parts = [f.result() for f in futs]
        z = np.concatenate([p[0] for p in parts])
        ok = np.concatenate([p[1] for p in parts])
    theta = obj.full(z)  # (n, P)
    nat = fit.law.from_internal(theta)
    return BootstrapResult(
        param_names=fit.law.param_names, samples=nat, seed=seed, converged=float(np.mean(ok))
    )
