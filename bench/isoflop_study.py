"""Approach 2 on synthetic isoFLOP sweeps with a known exponent (docs/isoflop.md's table).

Each of the 15 sweeps of ``analysis.isoflop.synthetic.study_designs`` (Chinchilla-form
losses, a from 0.40 to 0.60, 4-8 budgets, 2-3 decades of N per budget, off-centre and
drifting grids, noise 0.1-1%) is fitted with every (window, method) setting; per setting:
median and worst |a - a_true| / a_true, and in how many of the 15 the truth lies inside
the CI (the widened one, and the bootstrap's alone).

    .venv/bin/python bench/isoflop_study.py [--seeds 3] [--boot 300] [--derived --jitter-nd 0.08]

``--derived``: the C column is dropped (C = 6 N D, grouped at ``DERIVED_RTOL``);
``--jitter-nd f``: N and D off their nominal values by up to f (6ND scatters).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.isoflop.isoflop import fit_isoflops  # noqa: E402
from analysis.isoflop.synthetic import study_designs, sweep_points  # noqa: E402

SETTINGS = [(None, "parabola"), (None, "interp"), (4.0, "parabola"), (8.0, "parabola"),
            (16.0, "parabola"), (32.0, "parabola"), (8.0, "interp"), (16.0, "interp"),
            (32.0, "interp")]  # fmt: skip


def run(
    seed: int, n_boot: int, derived: bool, settings=SETTINGS, jitter_nd: float = 0.0
) -> list[dict]:
    rows = []
    for design in study_designs(seed):
        data = sweep_points(replace(design, round_sizes=jitter_nd))
        if derived:
            data = data.drop("C")
        for window, method in settings:
            try:
                fit = fit_isoflops(data, window=window, method=method, n_boot=n_boot, seed=seed)
            except Exception as err:  # a sweep the setting cannot fit counts as a miss
                rows.append({"seed": seed, "design": design.name, "window": window,
                             "method": method, "dev": np.inf, "in_ci": False,
                             "in_boot": False, "width": np.inf, "width_boot": np.inf,
                             "kept": 0, "error": str(err)})  # fmt: skip
                continue
            t = design.true_a
            rows.append({"seed": seed, "design": design.name, "window": window,
                         "method": method, "dev": abs(fit.a - t) / t,
                         "in_ci": fit.a_ci[0] <= t <= fit.a_ci[1],
                         "in_boot": fit.a_ci_boot[0] <= t <= fit.a_ci_boot[1],
                         "width": (fit.a_ci[1] - fit.a_ci[0]) / (2 * t),
                         "width_boot": (fit.a_ci_boot[1] - fit.a_ci_boot[0]) / (2 * t),
                         "kept": fit.kept.height, "error": ""})  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--boot", type=int, default=300)
    ap.add_argument("--derived", action="store_true", help="drop C: C = 6ND, grouped")
    ap.add_argument("--jitter-nd", type=float, default=0.0,
                    help="N and D off their nominal values by up to this fraction")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [r for s in range(args.seeds)
            for r in run(s, args.boot, args.derived, jitter_nd=args.jitter_nd)]
    print(f"{len(rows)} fits in {time.perf_counter() - t0:.0f} s; per seed: 15 sweeps")
    print("| window | method | seed | median dev | worst dev | truth in CI | in bootstrap CI "
          "| median CI half-width (widened, bootstrap) |")
    print("|---|---|---|---|---|---|---|---|")
    for window, method in SETTINGS:
        for s in range(args.seeds):
            sel = [r for r in rows if r["window"] == window and r["method"] == method
                   and r["seed"] == s]  # fmt: skip
            dev = np.array([r["dev"] for r in sel])
            print(f"| {window or 'all'} | {method} | {s} | {100 * np.median(dev):.2f}% | "
                  f"{100 * dev.max():.2f}% | {sum(r['in_ci'] for r in sel)}/{len(sel)} | "
                  f"{sum(r['in_boot'] for r in sel)}/{len(sel)} | "
                  f"{100 * np.median([r['width'] for r in sel]):.1f}%, "
                  f"{100 * np.median([r['width_boot'] for r in sel]):.1f}% |")


if __name__ == "__main__":
    main()
