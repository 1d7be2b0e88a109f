"""Time the variable-projection starts (solvers/varpro.py) against the 4,500-start grid.

    python bench/varpro_speed.py [--repeats 11] [--threads default]

Both are full ``fit_law`` calls of the Chinchilla law on Epoch's 240 points (Besiroglu et
al. 2024, arXiv 2404.10102): ``starts="grid"`` (float32 LM screen of 4,500 starts, LM
continuation of the best 64, L-BFGS-B polish of 4) and ``starts="varpro"`` (the default:
8 starts from the projected (alpha, beta) grid, LM continuation, polish). The two are run
interleaved, ``repeats`` pairs, so load from other jobs on a shared machine hits both
alike; the printed ratio is the median over pairs of grid CPU / varpro CPU (process time),
with the minimum times beside it. Also prints both objectives and their relative gap
(acceptance: <= 1e-9).

BLAS runs on one thread (set here before numpy loads, for both fits alike): the fits' 3x3 to
5x5 solves gain nothing from threads, and on a loaded 2-core machine the threads' spinning
made the ratio vary from 4.0x to 4.6x over runs (varpro's time is the more affected: more of
it is small solves) where one thread gives 7.7x. ``--threads default`` keeps the
environment's setting.
"""

from __future__ import annotations

import argparse
import os
import sys

if "--threads" not in sys.argv:  # before numpy is imported (module docstring)
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"
import time
import warnings

import numpy as np

from analysis import Chinchilla, fit_law, load_epoch_chinchilla


def _cpu(fn):
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--threads", choices=["default"], help="keep the environment's BLAS threads")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    data = load_epoch_chinchilla()
    print("load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    fit_law(Chinchilla(), data, starts="varpro")  # warm caches and imports
    t_grid, t_vp = [], []
    for _ in range(args.repeats):
        g, tg = _cpu(lambda: fit_law(Chinchilla(), data, starts="grid"))
        v, tv = _cpu(lambda: fit_law(Chinchilla(), data, starts="varpro"))
        t_grid.append(tg)
        t_vp.append(tv)
    ratio = np.median(np.array(t_grid) / np.array(t_vp))
    gap = abs(v.objective / g.objective - 1)
    print(f"grid   {g.n_starts:5d} starts  CPU min {min(t_grid):.4f} s  objective {g.objective!r}")
    print(f"varpro {v.n_starts:5d} starts  CPU min {min(t_vp):.4f} s  objective {v.objective!r}")
    print(f"objective relative gap {gap:.2e} (<= 1e-9: {gap <= 1e-9})")
    print(f"speed ratio grid / varpro (median of {args.repeats} interleaved pairs): {ratio:.2f}x")
    print("load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
