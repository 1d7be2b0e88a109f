"""The coverage table of docs/extrapolation.md: how often the extrapolation check's 95%
prediction intervals cover held-out losses on synthetic studies with known truth.

    python bench/extrapolation_coverage.py [--studies 200] [--no-polish]
    python bench/extrapolation_coverage.py --2d [--studies 200] [--dc-studies 100]
    python bench/extrapolation_coverage.py --2d-bootstrap [--studies 30] [--refits 40]

Each row: ``studies`` studies (seeds 0 .. studies-1) of n sizes log-spaced over ``span`` up to
N = 271k (x = 0.271, the demo's largest), L = A / x^B + E with A log-uniform, B uniform in
the row's ranges, E uniform in [1.8, 2.2], Gaussian noise of SD sigma per point;
``analysis.recipes.extrapolation.holdout_check`` refits without the k largest and predicts
them. Prints a markdown table (``Coverage.HEADER``) and the seconds it took.

``--2d``: the table of the two-variable laws (``analysis.synthetic.prediction_2d.coverage_2d``,
``ROWS_2D``): chinchilla and data_constrained studies with known truth, the largest N held
out, the delta-method 95% interval through the refit (both stages for data_constrained).

``--2d-bootstrap``: the measurement behind choosing the delta method over a parametric
bootstrap (docs/extrapolation.md): on ``studies`` studies per row, the held-out predictions'
spread over ``refits`` refits to the refit's own law plus Gaussian noise of its s (Efron &
Tibshirani 1993, "An Introduction to the Bootstrap", §6.5) beside the delta method's, and
the coverage of both intervals (PI = pred -/+ t sqrt(sd^2 + s^2), the same t and s).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl
from scipy import stats

from analysis.fit.prediction import holdout_largest_2d
from analysis.recipes.extrapolation import Coverage, holdout_coverage
from analysis.synthetic.prediction_2d import Coverage2D, coverage_2d, simulate_2d

ROWS = (
    # (n, span, k, sigma, extra keywords)
    (8, 48, 1, 0.005, {}),
    (8, 48, 1, 0.01, {}),
    (8, 48, 1, 0.02, {}),
    (8, 48, 2, 0.005, {}),
    (8, 48, 2, 0.01, {}),
    (8, 48, 2, 0.02, {}),
    (6, 48, 1, 0.01, {}),
    (6, 48, 2, 0.01, {}),
    (5, 48, 1, 0.01, {}),  # few points: the refit keeps 1 residual degree of freedom
    (8, 1000, 1, 0.01, {}),  # a wide range: 3 decades
    (8, 1000, 2, 0.01, {}),
    (8, 48, 1, 0.01, {"A_range": (0.3, 1.5), "B_range": (0.1, 0.1)}),  # B small
    (8, 48, 2, 0.01, {"A_range": (0.3, 1.5), "B_range": (0.1, 0.1)}),
)
"""The table's rows. B = 0.1 is drawn with A in [0.3, 1.5] (like the demo's data law,
1.43 / x^0.126): with A ~ 0.003 a curve of exponent 0.1 drops less than the noise."""


ROWS_2D = (
    # (law, sizes, design, sigma)
    ("chinchilla", 4, "grid", 0.005),
    ("chinchilla", 4, "grid", 0.02),
    ("chinchilla", 6, "grid", 0.005),
    ("chinchilla", 6, "grid", 0.01),
    ("chinchilla", 6, "grid", 0.02),
    ("chinchilla", 8, "grid", 0.01),
    ("chinchilla", 4, "isoflop", 0.01),
    ("chinchilla", 6, "isoflop", 0.01),
    ("chinchilla", 8, "isoflop", 0.02),
    ("data_constrained", 4, "grid", 0.005),
    ("data_constrained", 4, "grid", 0.01),
    ("data_constrained", 4, "grid", 0.02),
    ("data_constrained", 6, "grid", 0.005),
    ("data_constrained", 6, "grid", 0.01),
    ("data_constrained", 6, "grid", 0.02),
    ("data_constrained", 8, "grid", 0.01),
)
"""The two-variable table's rows (k = 1; sizes N log-spaced 1e7..1e9)."""


def table_2d(studies: int, dc_studies: int) -> None:
    print(Coverage2D.HEADER)
    for law, n, design, sigma in ROWS_2D:
        many = studies if law == "chinchilla" else dc_studies
        print(coverage_2d(law, n, sigma, design=design, studies=many, seed=0).row(), flush=True)


def _bootstrap_row(law: str, n: int, sigma: float, studies: int, refits: int) -> str:
    """Delta method beside a parametric bootstrap on ``studies`` studies (module docstring)."""
    from analysis.fit import prediction as pr

    ratios, hit_d, hit_b, tot = [], 0, 0, 0
    for seed in range(studies):
        runs, _ = simulate_2d(np.random.default_rng(seed), law, n, sigma)
        chk = holdout_largest_2d(runs, law, 1)
        if not chk.checked:
            continue
        lw = pr._law(law)
        keep = runs["N"].to_numpy() < runs["N"].max()
        train, held = runs.filter(pl.Series(keep)), runs.filter(pl.Series(~keep))
        fit, stage1 = pr.refit_2d(train, law)
        Xh = pr._columns(lw, held)
        pred, s2, dof, gm = pr._linearised(fit, stage1, train, law, Xh)
        clean = lw.predict(fit.params, pr._columns(lw, train))
        rng = np.random.default_rng(10_000 + seed)
        preds = []
        for _ in range(refits):
            noisy = train.with_columns(
                pl.Series("loss", clean + np.sqrt(s2) * rng.standard_normal(clean.size)))
            try:
                preds.append(lw.predict(pr.refit_2d(noisy, law)[0].params, Xh))
            except Exception:  # a resample whose stage 1 keeps too few runs: skipped
                continue
        sd_b = np.std(np.array(preds), axis=0, ddof=1)
        sd_d = np.sqrt(s2 * gm)
        ratios.append(float(np.median(sd_b / sd_d)))
        t = float(stats.t.ppf(0.975, dof))
        y = held["loss"].to_numpy()
        hit_d += int(np.sum(np.abs(y - pred) <= t * np.sqrt(sd_d**2 + s2)))
        hit_b += int(np.sum(np.abs(y - pred) <= t * np.sqrt(sd_b**2 + s2)))
        tot += y.size
    return (f"| {law} | {n} | {sigma:g} | {len(ratios)}/{studies} | {refits} | "
            f"{np.median(ratios):.2f} ({np.min(ratios):.2f}-{np.max(ratios):.2f}) | "
            f"{100 * hit_d / tot:.1f}% | {100 * hit_b / tot:.1f}% |")


def bootstrap_2d(studies: int, refits: int) -> None:
    print("| law | sizes | sigma | studies | refits | bootstrap sd / delta sd, median (range) "
          "| delta covered | bootstrap covered |\n|---|---|---|---|---|---|---|---|")
    for law, n, sigma in (("chinchilla", 4, 0.01), ("chinchilla", 6, 0.01),
                          ("data_constrained", 6, 0.01)):
        print(_bootstrap_row(law, n, sigma, studies, refits), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=None,
                    help="studies per row (default 200; --2d-bootstrap: 30)")
    ap.add_argument("--no-polish", action="store_true",
                    help="skip fit_law's polish of each refit (the same optimum, faster)")
    ap.add_argument("--2d", dest="two_d", action="store_true",
                    help="the table of chinchilla and data_constrained (ROWS_2D)")
    ap.add_argument("--dc-studies", type=int, default=100,
                    help="--2d: studies per data_constrained row (~0.4 s each)")
    ap.add_argument("--2d-bootstrap", dest="two_d_boot", action="store_true",
                    help="delta method against a parametric bootstrap (slow: refits each)")
    ap.add_argument("--refits", type=int, default=40)
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.two_d or args.two_d_boot:
        if args.two_d:
            table_2d(args.studies or 200, args.dc_studies)
        else:
            bootstrap_2d(args.studies or 30, args.refits)
        print(f"\n({time.perf_counter() - t0:.0f} s)")
        return
    args.studies = args.studies or 200
    print(Coverage.HEADER)
    for n, span, k, sigma, kw in ROWS:
        cov = holdout_coverage(n, span, k, sigma, studies=args.studies, seed=0,
                               polish=not args.no_polish, **kw)
        print(cov.row(), flush=True)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
