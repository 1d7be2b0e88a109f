"""Approach 2 on synthetic isoFLOP sweeps with a known exponent: the study that chooses
``fit_isoflops``'s defaults (docs/isoflop.md's tables).

``--study realistic`` (default): ``analysis.synthetic.isoflop_realistic.realistic_study``, 24 sweeps
per seed drawn from the ranges of published isoFLOP sweeps (loss noise 0.005-0.02 nats,
heteroscedastic; off-centre, lopsided, warped ladders of 3-12 sizes 0.1-0.3 decades
apart; 4-8 budgets over 2-3.5 decades of C; α != β). ``--study legacy``: the 15
hand-written sweeps of ``analysis.synthetic.isoflop.study_designs`` (relative noise
0.1-1%) on which the old default (window 16) was chosen.

Every (window, method) candidate fits every sweep, and so does a reference that no
approach-2 estimator can beat on these sweeps: approach 3 with the law that drew them,
L = E + A/N^α + B/D^β fitted to every point by least squares (``fit_law("chinchilla",
loss="mse", space="linear")``: the noise is Gaussian in the loss), a = β/(α+β); its errors
are what the noise alone leaves. Per candidate: median and worst
|a - a_true| / a_true over the sweeps it fitted, how many it refused (fewer than 2
usable budgets: an error, not a wrong exponent), and in how many the truth lies inside
the 95% CI (the widened one, and the bootstrap's alone).

    .venv/bin/python bench/isoflop_study.py [--seeds 3] [--boot 200] [--jobs 2] [--budgets 4,5,6,8]
    .venv/bin/python bench/isoflop_study.py --first-seed 10 --seeds 50 --default-only  # 1,200 new sweeps
    .venv/bin/python bench/isoflop_study.py --study legacy [--derived --jitter-nd 0.08]

``--derived`` (legacy): the C column is dropped (C = 6 N D, grouped at ``DERIVED_RTOL``);
``--jitter-nd f``: N and D off their nominal values by up to f (6ND scatters).
``--default-only``: the default (window 8, two-stage) and the joint line beside it, with
the reference; about 1 minute per 25 seeds. About 2 minutes on 2 cores for the default 3
seeds of every candidate.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.errors import AnalysisInputError  # noqa: E402
from analysis.fit.fit import fit_law  # noqa: E402
from analysis.isoflop.isoflop import fit_isoflops  # noqa: E402
from analysis.synthetic.isoflop import study_designs, sweep_points  # noqa: E402
from analysis.synthetic.isoflop_realistic import realistic_points, realistic_study  # noqa: E402

SETTINGS = [(None, "parabola", False), (4.0, "parabola", False), (6.0, "parabola", False),
            (8.0, "parabola", False), (12.0, "parabola", False), (16.0, "parabola", False),
            (32.0, "parabola", False), (None, "parabola", True), (4.0, "parabola", True),
            (6.0, "parabola", True), (8.0, "parabola", True), (12.0, "parabola", True),
            (16.0, "parabola", True), (32.0, "parabola", True), (None, "interp", False),
            (8.0, "interp", False), (16.0, "interp", False)]  # fmt: skip
"""(window, method, joint): the two-stage fit (a parabola per budget, a line through the
vertices; joint=False, the old fit) and the joint one (``analysis.isoflop.joint``)."""
DEFAULT_ONLY = [(8.0, "parabola", False), (8.0, "parabola", True)]
"""``--default-only``'s candidates: the default and the joint line at its window."""
ORACLE = ("law", "approach 3", False)
"""The reference row's (window, method, joint) key: the drawing law fitted to all points."""


def _oracle_a(data) -> float:
    """a = β/(α+β) of the Chinchilla law fitted to every point of a sweep."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = fit_law("chinchilla", data, loss="mse", space="linear", warn=False).params
    return p["beta"] / (p["alpha"] + p["beta"])


def _sweeps(study: str, seed: int, derived: bool, jitter_nd: float, budgets: tuple[int, ...] = (4, 5, 6, 8)):
    """(name, true a, data) of every sweep of one seed."""
    if study == "realistic":
        return [(s.name, s.true_a, realistic_points(s)) for s in realistic_study(seed, budget_counts=budgets)]
    out = []
    for d in study_designs(seed):
        data = sweep_points(replace(d, round_sizes=jitter_nd))
        out.append((d.name, d.true_a, data.drop("C") if derived else data))
    return out


def run(job: tuple) -> list[dict]:
    """Every candidate on every sweep of one seed: one row per (sweep, candidate)."""
    study, seed, n_boot, derived, jitter_nd, budgets, settings = job
    rows = []
    for name, t, data in _sweeps(study, seed, derived, jitter_nd, budgets):
        window, method, joint = ORACLE
        rows.append({"seed": seed, "design": name, "window": window, "method": method,
                     "joint": joint, "dev": abs(_oracle_a(data) - t) / t, "in_ci": False,
                     "in_boot": False, "width": np.nan, "lost": 0, "warned": False,
                     "error": ""})  # fmt: skip
        for window, method, joint in settings:
            row = {"seed": seed, "design": name, "window": window, "method": method,
                   "joint": joint}
            try:
                fit = fit_isoflops(data, window=window, method=method, joint=joint,
                                   n_boot=n_boot, seed=seed)
            except AnalysisInputError as err:  # refused: fewer than 2 usable budgets
                rows.append({**row, "dev": np.nan, "in_ci": False, "in_boot": False,
                             "width": np.nan, "lost": 0, "warned": True,
                             "error": str(err)})  # fmt: skip
                continue
            lost = sum("usable vertex" in w for w in fit.warnings)
            rows.append({**row, "dev": abs(fit.a - t) / t,
                         "in_ci": fit.a_ci[0] <= t <= fit.a_ci[1],
                         "in_boot": fit.a_ci_boot[0] <= t <= fit.a_ci_boot[1],
                         "width": (fit.a_ci[1] - fit.a_ci[0]) / (2 * t),
                         "lost": lost, "warned": bool(fit.warnings), "error": ""})  # fmt: skip
    return rows


def table(rows: list[dict], seeds: list[int], settings: list[tuple]) -> list[str]:
    """One markdown row per candidate, all seeds pooled, then the per-seed medians."""
    out = ["| window | method | line | median dev | worst dev | dev > 4% | refused | truth in CI "
           "| in bootstrap CI | median CI half-width / a | median dev per seed "
           "| warned | worst dev unwarned |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for window, method, joint in [*settings, ORACLE]:
        sel = [r for r in rows if r["window"] == window and r["method"] == method
               and r["joint"] == joint]  # fmt: skip
        fitted = [r for r in sel if not r["error"]]
        dev = np.array([r["dev"] for r in fitted])
        clean = [r["dev"] for r in fitted if not r["warned"]]
        per_seed = [np.median([r["dev"] for r in fitted if r["seed"] == s]) for s in seeds]
        line = "-" if (window, method, joint) == ORACLE else "joint" if joint else "two-stage"
        ci = (f"{sum(r['in_ci'] for r in fitted)}/{len(fitted)} | "
              f"{sum(r['in_boot'] for r in fitted)}/{len(fitted)} | "
              f"{100 * np.median([r['width'] for r in fitted]):.1f}% | ")
        out.append(
            f"| {window or 'all'} | {method} | {line} | {100 * np.median(dev):.2f}% | "
            f"{100 * dev.max():.2f}% | {int(np.sum(dev > 0.04))} | {len(sel) - len(fitted)} | "
            + ("- | - | - | " if line == "-" else ci)
            + ", ".join(f"{100 * m:.2f}%" for m in per_seed)
            + f" | {sum(r['warned'] for r in fitted)} | {100 * max(clean, default=np.nan):.2f}% |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--study", choices=("realistic", "legacy"), default="realistic")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--default-only", action="store_true",
                    help="only the default and the joint line at window 8 (and the reference)")
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--derived", action="store_true", help="legacy: drop C: C = 6ND, grouped")
    ap.add_argument("--jitter-nd", type=float, default=0.0,
                    help="legacy: N and D off their nominal values by up to this fraction")
    ap.add_argument("--budgets", default="4,5,6,8",
                    help="realistic: the budget counts a sweep draws from (8,9,10,12: as published)")
    args = ap.parse_args()
    budgets = tuple(int(k) for k in args.budgets.split(","))
    t0 = time.perf_counter()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    settings = DEFAULT_ONLY if args.default_only else SETTINGS
    jobs = [(args.study, s, args.boot, args.derived, args.jitter_nd, budgets, settings) for s in seeds]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = [r for part in pool.map(run, jobs) for r in part]
    n_sweeps = len({(r["seed"], r["design"]) for r in rows})
    print(f"{args.study} study: {n_sweeps} sweeps x {len(settings)} candidates, "
          f"{args.boot} resamples, {time.perf_counter() - t0:.0f} s")
    print("\n".join(table(rows, seeds, settings)))


if __name__ == "__main__":
    main()
