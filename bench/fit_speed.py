"""Time the default grid fits against a plain scipy loop, and the bootstrap.

    python bench/fit_speed.py [--repeats 3] [--dc-sample 400] [--chinchilla-sample 0]
                              [--resamples 1000] [--workers 2] [--no-bootstrap]

Two fits from their default start grids (analysis/fit/fit.py: float32 Levenberg-Marquardt
screen of every start, float64 LM on the best 64, scipy polish of the best 4):

- Chinchilla on Epoch's 240 points (Besiroglu et al. 2024): 4,500 starts;
- the 7-parameter DataConstrained law (Muennighoff et al. 2023) on a 182-run synthetic
  table shaped like the datablations C4 grid (8 unique-token budgets U = 1e8..1e11, 6 sizes
  N = 1e7..9e9, 1/4/16/59 epochs, 182 of those 192 runs drawn with seed 0; losses from
  Muennighoff's published constants times 1% log-normal noise): 32,400 starts.

Each is set beside a plain scipy loop over the same starts: scipy.optimize.minimize
(L-BFGS-B, analytic gradient, the fitter's polish tolerances ftol 1e-15, gtol 1e-10) from
every start, the lowest objective kept. ``--chinchilla-sample``/``--dc-sample`` N > 0
time the loop on N starts drawn with seed 0 and extrapolate its time linearly to all
starts (the objective is then the best of the sample); 0 runs every start. Prints wall
and process-CPU seconds (the fitter's best of ``repeats``), the speed-up (scipy / fitter)
and the objective each reached; CPU time is robust to other load on a shared machine,
wall time is what a user waits. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
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
from analysis.tables.published import MUENNIGHOFF
from analysis.solvers.search import polish_one
from analysis.solvers.starts import start_points


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


def scipy_loop(fit: FitResult, sample: int) -> tuple[float, float, float, int]:
    """(wall s, CPU s, best objective, starts run) of scipy's L-BFGS-B from each grid start
    of ``fit`` (or a seeded sample of ``sample`` of them; times extrapolated to all)."""
    z0 = start_points(fit.law, fit.free, "grid", fit.lo, fit.hi, fit.seed)
    rows = np.arange(z0.shape[0])
    if 0 < sample < rows.size:
        rows = np.sort(np.random.default_rng(0).choice(rows.size, sample, replace=False))
    with np.errstate(all="ignore"):
        fs, wall, cpu = _timed(
            lambda: [polish_one(fit.problem, z0[i], fit.lo, fit.hi)[1] for i in rows]
        )
    scale = z0.shape[0] / rows.size
    return wall * scale, cpu * scale, float(np.nanmin(fs)), int(rows.size)


def compare(name: str, fit_fn: Callable[[], FitResult], repeats: int, sample: int) -> None:
    runs = [_timed(fit_fn) for _ in range(repeats)]
    fit = runs[0][0]
    wall, cpu = min(r[1] for r in runs), min(r[2] for r in runs)
    s_wall, s_cpu, s_obj, n_run = scipy_loop(fit, sample)
    how = (
        "all starts"
        if n_run == fit.n_starts
        else f"{n_run} seeded starts, time x{fit.n_starts / n_run:g}"
    )
    print(f"{name}: {fit.n_starts:,} starts, {fit.n_points} points")
    print(
        f"  fit_law      {wall:7.2f} s wall {cpu:7.2f} s CPU  objective {fit.objective:.16g}"
        f"  (best of {repeats})"
    )
    print(
        f"  scipy loop   {s_wall:7.2f} s wall {s_cpu:7.2f} s CPU  objective {s_obj:.16g}  ({how})"
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
    ap.add_argument("--chinchilla-sample", type=int, default=0, help="0: every start")
    ap.add_argument("--dc-sample", type=int, default=400, help="0: every start (~10 min)")
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
        args.chinchilla_sample,
    )
    table = datablations_like()
    compare(
        "DataConstrained (7 parameters), 182-run Muennighoff-like table",
        lambda: fit_law(DataConstrained(), table),
        args.repeats,
        args.dc_sample,
    )
    if not args.no_bootstrap:
        bootstrap(fit_law(Chinchilla(), epoch), args.resamples, args.workers, args.repeats)
    print(_load())


if __name__ == "__main__":
    main()
