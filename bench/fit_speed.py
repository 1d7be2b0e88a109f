"""Time the default grid fits against a plain scipy loop, and the bootstrap.

    python bench/fit_speed.py [--repeats 3] [--baseline-cap 400] [--dc-sample N]
                              [--chinchilla-sample N] [--resamples 1000] [--workers 2]
                              [--no-bootstrap]

Two fits from their default start grids (analysis/fit/fit.py: float32 Levenberg-Marquardt
screen of every start, float64 LM on the best 64, scipy polish of the best 4):

- Chinchilla on Epoch's 240 points (Besiroglu et al. 2024, arXiv 2404.10102): 4,500 starts;
- the 7-parameter DataConstrained law (Muennighoff et al. 2023, arXiv 2305.16264) on a
  182-run synthetic table shaped like the datablations C4 grid (8 unique-token budgets
  U = 1e8..1e11, 6 sizes N = 1e7..9e9, 1/4/16/59 epochs, 182 of those 192 runs drawn with
  seed 0; losses from Muennighoff's published constants times 1% log-normal noise): 32,400
  starts.

Each is set beside a plain scipy loop over the same starts: scipy.optimize.minimize
(L-BFGS-B, analytic gradient, the fitter's polish tolerances ftol 1e-15, gtol 1e-10) from
each start, the lowest objective kept. The loop is capped (``baseline_sample``): at most
``--baseline-cap`` starts (default ``BASELINE_CAP`` = 400), drawn uniformly without
replacement with seed 0, are run and their time is scaled to every start (x n_starts /
sample, stated in the output with the 95% range of that estimate: a simple random sample's
mean time per start, finite-population corrected, Cochran 1977, "Sampling Techniques",
§2.4). The objective is then the best of the sample (the fitter's may be lower by what the
unsampled starts would find). ``--chinchilla-sample``/``--dc-sample`` N set one loop's
sample (0: every start; Chinchilla's 4,500 starts alone took 14+ minutes uncapped). Prints
wall and process-CPU seconds (the fitter's best of ``repeats``), the speed-up (scipy /
fitter) and the objective each reached; CPU time is robust to other load on a shared
machine, wall time is what a user waits. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from analysis import (
    Chinchilla,
    DataConstrained,
    FitResult,
    IdentifiabilityWarning,
    fit_law,
    load_epoch_chinchilla,
)
from analysis.solvers.search import polish_one
from analysis.solvers.starts import start_points
from analysis.tables.published import MUENNIGHOFF


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def datablations_like(seed: int = 0, noise: float = 0.01) -> pl.DataFrame:
    """The 182-run Muennighoff-like table of the module docstring (N, D, U, loss)."""
    law = DataConstrained()
    rows = [
        (N, U * ep, U)
        for U in np.geomspace(1e8, 1e11, 8)
        for N in np.geomspace(1e7, 9e9, 6)
        for ep in (1, 4, 16, 59)
    ]
    rng = np.random.default_rng(seed)
    rows = [rows[i] for i in np.sort(rng.choice(len(rows), 182, replace=False))]
    N, D, U = (np.array(c) for c in zip(*rows))
    clean = law.predict(MUENNIGHOFF, {"N": N, "D": D, "U": U})
    loss = clean * np.exp(rng.normal(0.0, noise, N.size))
    return pl.DataFrame({"N": N, "D": D, "U": U, "loss": loss})


BASELINE_CAP = 400
"""Starts the scipy loop runs at most by default (a seeded sample, its time scaled to all)."""


@dataclass(frozen=True)
class BaselineSample:
    """Which grid starts the scipy loop runs: ``rows`` (sorted indices) of ``n_starts``."""

    rows: np.ndarray
    n_starts: int

    @property
    def scale(self) -> float:
        """The factor a sample's total time is multiplied by to stand for every start."""
        return self.n_starts / self.rows.size

    @property
    def capped(self) -> bool:
        return self.rows.size < self.n_starts

    def describe(self) -> str:
        if not self.capped:
            return f"all {self.n_starts:,} starts"
        return (f"{self.rows.size:,} of {self.n_starts:,} starts, seeded sample, "
                f"time x{self.scale:.4g}")


def baseline_sample(n_starts: int, cap: int, seed: int = 0) -> BaselineSample:
    """At most ``cap`` of ``n_starts`` start indices, uniform without replacement (seeded);
    ``cap`` <= 0 or >= n_starts: every start."""
    if n_starts < 1:
        raise ValueError(f"n_starts must be >= 1, got {n_starts}")
    if 0 < cap < n_starts:
        rows = np.sort(np.random.default_rng(seed).choice(n_starts, cap, replace=False))
    else:
        rows = np.arange(n_starts)
    return BaselineSample(rows, int(n_starts))


@dataclass(frozen=True)
class LoopTime:
    """The scipy loop's time for every start, estimated from ``sample``'s per-start times."""

    sample: BaselineSample
    wall: float  # seconds for every start (the sample's sum x scale)
    cpu: float
    wall_half: float  # half-width of the 95% range of ``wall`` (0 when every start ran)
    objective: float  # best objective of the starts run

    @property
    def label(self) -> str:
        if not self.sample.capped:
            return self.sample.describe()
        return f"{self.sample.describe()}, wall +/-{self.wall_half:.3g} s (95%)"


def scale_times(sample: BaselineSample, wall_each: np.ndarray, cpu_each: np.ndarray,
                objectives: np.ndarray) -> LoopTime:
    """Totals for every start from the sample's per-start times: N x mean, and the 95% range
    1.96 N sd / sqrt(n) sqrt(1 - n / N) of a simple random sample's total (Cochran 1977,
    "Sampling Techniques", §2.4)."""
    n, N = sample.rows.size, sample.n_starts
    wall_each = np.asarray(wall_each, dtype=float)
    if wall_each.size != n or np.asarray(cpu_each).size != n:
        raise ValueError(f"{wall_each.size} times for a sample of {n} starts")
    sd = float(np.std(wall_each, ddof=1)) if n > 1 else 0.0
    half = 1.96 * N * sd / np.sqrt(n) * np.sqrt(max(1.0 - n / N, 0.0))
    return LoopTime(sample, float(np.sum(wall_each)) * sample.scale,
                    float(np.sum(cpu_each)) * sample.scale, float(half),
                    float(np.nanmin(objectives)))


def scipy_loop(fit: FitResult, cap: int) -> LoopTime:
    """scipy's L-BFGS-B from each grid start of ``fit`` in ``baseline_sample(n, cap)``, each
    timed; the totals scaled to every start (``scale_times``)."""
    z0 = start_points(fit.law, fit.free, "grid", fit.lo, fit.hi, fit.seed)
    sample = baseline_sample(z0.shape[0], cap)
    walls, cpus, fs = [], [], []
    with np.errstate(all="ignore"):
        for i in sample.rows:
            f, wall, cpu = _timed(lambda i=i: polish_one(fit.problem, z0[i], fit.lo, fit.hi)[1])
            walls.append(wall)
            cpus.append(cpu)
            fs.append(f)
    return scale_times(sample, np.array(walls), np.array(cpus), np.array(fs))


def compare(name: str, fit_fn: Callable[[], FitResult], repeats: int, cap: int) -> None:
    runs = [_timed(fit_fn) for _ in range(repeats)]
    fit = runs[0][0]
    wall, cpu = min(r[1] for r in runs), min(r[2] for r in runs)
    loop = scipy_loop(fit, cap)
    s_wall, s_cpu, s_obj = loop.wall, loop.cpu, loop.objective
    print(f"{name}: {fit.n_starts:,} starts, {fit.n_points} points")
    print(
        f"  fit_law      {wall:7.2f} s wall {cpu:7.2f} s CPU  objective {fit.objective:.16g}"
        f"  (best of {repeats})"
    )
    print(
        f"  scipy loop   {s_wall:7.2f} s wall {s_cpu:7.2f} s CPU  objective {s_obj:.16g}"
        f"  ({loop.label})"
    )
    print(
        f"  speed-up     {s_wall / wall:7.1f}x wall {s_cpu / cpu:6.1f}x CPU;"
        f"  objective fit - scipy = {fit.objective - s_obj:+.2e} ({(fit.objective - s_obj) / s_obj:+.1e} relative)"
    )
    params = ", ".join(f"{k}={v:.5g}" for k, v in fit.params.items())
    print(f"  fit: {params}")


def bootstrap(fit: FitResult, resamples: int, workers: int, repeats: int) -> None:
    for w in sorted({1, workers}):
        runs = [
            _timed(lambda w=w: fit.bootstrap(resamples, seed=0, workers=w)) for _ in range(repeats)
        ]
        boot = runs[0][0]
        wall, cpu = min(r[1] for r in runs), min(r[2] for r in runs)
        se = ", ".join(f"{k} {v:.4g}" for k, v in boot.se.items())
        print(
            f"bootstrap: {boot.n} resamples, {w} worker(s): {wall:.2f} s wall, {cpu:.2f} s CPU"
            f" (best of {repeats}); SE {se}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline-cap", type=int, default=BASELINE_CAP,
                    help="scipy loop: at most this many seeded starts, time scaled to all "
                    "(0: every start; Chinchilla's alone took 14+ minutes)")
    ap.add_argument("--chinchilla-sample", type=int, default=None,
                    help="the Chinchilla loop's cap (default --baseline-cap; 0: every start)")
    ap.add_argument("--dc-sample", type=int, default=None,
                    help="the DataConstrained loop's cap (default --baseline-cap; 0: every "
                    "start, ~10 min)")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-bootstrap", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore", IdentifiabilityWarning)
    print(f"cpus: {os.cpu_count()}, {_load()}")
    epoch = load_epoch_chinchilla()
    compare(
        "Chinchilla, Epoch's data (the grid's starts, as the scipy loop; the default "
        "variable-projection starts: bench/varpro_speed.py)",
        lambda: fit_law(Chinchilla(), epoch, starts="grid"),
        args.repeats,
        args.baseline_cap if args.chinchilla_sample is None else args.chinchilla_sample,
    )
    table = datablations_like()
    compare(
        "DataConstrained (7 parameters), 182-run Muennighoff-like table",
        lambda: fit_law(DataConstrained(), table),
        args.repeats,
        args.baseline_cap if args.dc_sample is None else args.dc_sample,
    )
    if not args.no_bootstrap:
        bootstrap(fit_law(Chinchilla(), epoch), args.resamples, args.workers, args.repeats)
    print(_load())


if __name__ == "__main__":
    main()
