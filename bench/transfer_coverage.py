"""Coverage of the transfer law's 95% CIs on synthetic lr x batch studies with a known truth.

``python bench/transfer_coverage.py [--studies 100] [--seed 0]``: per batch grid (3 and 4
batch sizes a factor 2 apart, off-centre by up to half a step), ``--studies`` studies of
``analysis.synthetic.transfer.synthetic_lr_batch_study`` (LrBatchTruth: Step Law's
lr* = 1.79 N^-0.713 D^0.307 and B* = 0.58 D^0.571 (Li et al. 2025, arXiv 2503.04715), an lr
valley skewed towards divergence, a batch valley skewed in ln B, runs that diverge 1.2 ln
units above their batch's lr optimum, loss noise 0.01 nats; 5 sizes 6e7-1e9, 3 token budgets
each (10, 40, 160 tokens per parameter), 6 lr values a factor 2 apart), each fitted as
``fit_transfer(runs, ("N", "D"), "optim.lr", best_over="train.batch_size")``. Prints, per
exponent: the mean error and its SD over studies, the mean of the fit's own SE, the share of
studies whose |error| < 2 SE, and the 95% CI's coverage; then accepted optima outside their
window (must be 0) and the groups located to the grid's resolution.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.synthetic.transfer import LrBatchTruth, synthetic_lr_batch_study  # noqa: E402
from analysis.transfer.transfer import fit_transfer  # noqa: E402

SIZES = np.geomspace(6e7, 1e9, 5)


def study(b_points: int, studies: int, seed: int, truth: LrBatchTruth) -> dict[str, float]:
    """One grid's numbers over ``studies`` seeded studies."""
    err, se, cover, outside, coarse, groups, failed = [], [], [], 0, 0, 0, 0
    true = np.array([truth.a_n, truth.a_d])
    for s in range(studies):
        runs = synthetic_lr_batch_study(truth, SIZES, b_points=b_points, rng=seed + s)
        try:
            fit = fit_transfer(runs, ("N", "D"), "optim.lr", best_over="train.batch_size")
        except Exception as exc:  # noqa: BLE001 - counted, the study goes on
            failed += 1
            print(f"  study {seed + s}: {exc}", file=sys.stderr)
            continue
        params = fit.law.params()[1:]
        err.append(np.array([p[1] for p in params]) - true)
        se.append(np.sqrt(np.diag(fit.law.cov))[1:])
        cover.append([lo <= t <= hi for (_, _, lo, hi), t in zip(params, true)])
        ok = fit.accepted
        u, lo, hi = ok["u_opt"].to_numpy(), np.log(ok["hp_window_lo"].to_numpy()), np.log(ok["hp_window_hi"].to_numpy())
        outside += int(np.sum((u < lo - 1e-12) | (u > hi + 1e-12)))
        coarse += int(ok["flag"].str.starts_with("too deep").sum())
        groups += ok.height
    e, s_, c = np.array(err), np.array(se), np.array(cover)
    out = {"studies": len(e), "failed": failed, "outside": outside, "coarse": coarse, "groups": groups}
    for j, name in enumerate(("a_N", "a_D")):
        out[name] = (float(e[:, j].mean()), float(e[:, j].std()), float(s_[:, j].mean()),
                     float(np.mean(np.abs(e[:, j]) < 2 * s_[:, j])), float(c[:, j].mean()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--b-points", type=int, nargs="+", default=[3, 4])
    args = ap.parse_args()
    truth = LrBatchTruth()
    for b in args.b_points:
        t0 = time.perf_counter()
        r = study(b, args.studies, args.seed, truth)
        print(f"{b} batch sizes: {r['studies']} studies ({r['failed']} failed), "
              f"{time.perf_counter() - t0:.0f} s")
        for name, t in (("a_N", truth.a_n), ("a_D", truth.a_d)):
            m, sd, se, in2, cov = r[name]
            print(f"  {name} (truth {t:+.3f}): error mean {m:+.4f}, sd {sd:.4f}; mean SE {se:.4f}; "
                  f"|error| < 2 SE in {100 * in2:.0f}%; 95% CI covers the truth in {100 * cov:.0f}%")
        print(f"  accepted optima outside their window: {r['outside']}; located to the grid's "
              f"resolution (too deep): {r['coarse']} of {r['groups']} groups")


if __name__ == "__main__":
    main()
