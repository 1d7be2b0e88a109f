"""Nonparametric bootstrap of a fit: resample points with replacement, refit, summarise.

Procedure (the resampling Epoch used for its SEs: Besiroglu et al. 2024, arXiv 2404.10102):
- all ``n`` resamples are drawn up front from ``numpy.random.default_rng(seed)`` as
  index draws turned into per-point counts (n, n_points), so the resamples depend on the
  seed only, never on the number of workers;
- each resample is refitted by minimising the count-weighted objective (identical to
  fitting the resampled rows) with the batched L-BFGS of solvers/multistart.py, started at the
  full-data optimum, fixed parameters held fixed (for a two-stage fit: the base law);
  a fit's own per-point weights, ties, residual space and loss come with its objective
  (analysis/laws/fit_objective.py), so a resampled point keeps its weight (count x weight);
- resamples are split into contiguous chunks, one per worker or, when there are enough
  resamples, up to ``CHUNKS`` of at least ``MIN_CHUNK`` (so that progress moves), refitted
  on a thread pool: numpy releases the GIL inside its array kernels, which is where the
  time goes, and threads need no picklable state, no ``if __name__ == "__main__"`` guard
  in notebooks and no fork of a process that has polars' thread pool running;
  ``workers=1`` runs them inline. The chunks never depend on whether anyone watches (a
  chunk's composition moves its refits in the last digits: about 1e-8 relative);
- ``progress`` (progress.py; None: the enclosing ``reporting`` block's) gets a
  ``BootstrapProgress`` before the first chunk and after each one done;
- SE = sample standard deviation (ddof=1) of each natural parameter; CIs are percentile
  intervals.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisInputError
from analysis.laws.fit_objective import Objective
from analysis.progress import BootstrapProgress, Reporter, progress_fn
from analysis.solvers.multistart import lbfgs_batched

__all__ = ["CHUNKS", "MAX_RESAMPLES", "MIN_CHUNK", "BootstrapResult", "bootstrap_fit",
           "check_resamples"]

CHUNKS = 10
"""Chunks of a bootstrap at most (unless there are more workers): progress in 10% steps."""
MIN_CHUNK = 40
"""Resamples per extra chunk at least: each chunk costs its slowest refit's iterations of
Python overhead (about 0.05 s), so 200 resamples go in 5 chunks, 1,000 in 10."""
MAX_RESAMPLES = 100_000
"""Most resamples of one bootstrap. They are drawn up front, 16 bytes per resample and
point (draws and counts), so the bound keeps a fit of 500 points under 1 GB; percentile
CIs settle within a few thousand resamples."""


def check_resamples(n: int, *, what: str = "bootstrap") -> None:
    """Refuse more than ``MAX_RESAMPLES`` resamples before anything is allocated."""
    if n > MAX_RESAMPLES:
        raise AnalysisInputError(
            f"{what}: {n} resamples exceed the maximum of {MAX_RESAMPLES:,} (drawn up front: "
            f"16 bytes per resample and point; CIs settle within a few thousand)")


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


def _chunks(n: int, workers: int) -> list[np.ndarray]:
    """Indices of the resamples in each chunk (module docstring)."""
    k = max(workers, min(CHUNKS, n // MIN_CHUNK))
    return [c for c in np.array_split(np.arange(n), k) if c.size]


def _refit_all(obj: Objective, fit, counts: np.ndarray, workers: int,
               tell: Callable[[int], None]) -> tuple[np.ndarray, np.ndarray]:
    """Refit every row of ``counts`` in chunks (inline, or on ``workers`` threads), calling
    ``tell`` with the resamples done after each chunk; returns (z (n, P_free), ok (n,))."""
    chunks = _chunks(counts.shape[0], workers)
    parts: list = [None] * len(chunks)

    def refit(c: np.ndarray):
        return _refit_chunk(obj, fit.z, fit.lo, fit.hi, counts[c])

    done = 0
    with ThreadPoolExecutor(workers) if workers > 1 else nullcontext() as pool:
        if pool is None:
            finished = ((i, refit(c)) for i, c in enumerate(chunks))
        else:
            futs = {pool.submit(refit, c): i for i, c in enumerate(chunks)}
            finished = ((futs[f], f.result()) for f in as_completed(futs))
        for i, part in finished:
            parts[i] = part
            done += chunks[i].size
            tell(done)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def bootstrap_fit(
    fit,
    *,
    n: int = 1000,
    seed: int = 0,
    workers: int | None = None,
    progress: bool | Reporter | None = None,
) -> BootstrapResult:
    """Bootstrap ``fit`` (a FitResult) with ``n`` seeded resamples over ``workers`` threads
    (default: the number of CPUs). ``progress``: a callable receives a
    ``BootstrapProgress`` (resamples refitted so far) before the first chunk and after
    each; True prints them to stderr; None: the enclosing ``reporting`` block's."""
    if n < 2:
        raise AnalysisInputError(f"bootstrap needs n >= 2 resamples, got {n}")
    check_resamples(n)
    report = progress_fn(progress)
    start = time.perf_counter()

    def tell(done: int) -> None:
        if report is not None:
            report(BootstrapProgress(fit.law.name, done, n, time.perf_counter() - start))

    obj: Objective = fit.problem
    m = fit.n_points
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, m, size=(n, m))
    counts = np.zeros((n, m))
    np.add.at(counts, (np.repeat(np.arange(n), m), draws.ravel()), 1.0)
    workers = max(1, min(int(workers or os.cpu_count() or 1), n))
    tell(0)
    if fit.z.size == 0:
        z, ok = np.zeros((n, 0)), np.ones(n, dtype=bool)
        tell(n)
    else:
        z, ok = _refit_all(obj, fit, counts, workers, tell)
    theta = obj.full(z)  # (n, P)
    nat = fit.law.from_internal(theta)
    return BootstrapResult(
        param_names=fit.law.param_names, samples=nat, seed=seed, converged=float(np.mean(ok))
    )
