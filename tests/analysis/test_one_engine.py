"""One sweep's runs, three commands, one answer: the report's E and 95% CI of a recipe
(``infinite_compute.analyze``), compare's (``compare_recipes`` on ``recipe_cells``' rows)
and next's (``target_fits.fit_target`` on the same best cells) agree to 1e-9, and so does
whether E is identified. Fails if the engines, point rules or intervals diverge again."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.adaptive.target_fits import SizePoints, fit_target
from analysis.recipes.compare import compare_recipes
from analysis.recipes.infinite_compute import analyze, reportable
from analysis.recipes.kim_law import SCALE
from scalelab.adaptive.recipe_cells import recipe_cells

SIZES = [5e3, 1e4, 2.5e4, 5e4, 1e5, 2.5e5]
LAWS = {0.1: (0.05, 0.5, 2.25), 1.0: (0.04, 0.6, 1.95)}  # wd -> A, B, E (x = N / 1e6)


def _runs(seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES:
        for wd, (A, B, E) in LAWS.items():
            for ep, pen in ((32, 0.03), (64, 0.0)):
                rows.append({"block": "tuned", "N": n, "D_unique": 32768.0, "state": "COMPLETED",
                             "name": f"n{n:g}_wd{wd}_e{ep}", "optim.weight_decay": wd,
                             "data.epochs": ep,
                             "final_loss": A * (n / SCALE) ** -B + E + pen + rng.normal(0, 0.004)})
    return pl.DataFrame(rows)


@pytest.mark.parametrize("seed", [0, 1])
def test_report_compare_and_next_give_one_E_and_CI(seed):
    runs = _runs(seed)
    report = analyze(runs)
    cells = recipe_cells(runs, ("regularized", "standard"))
    cmp = compare_recipes(cells.rows["regularized"], cells.rows["standard"],
                          names=("regularized", "standard"), n_boot=20)
    for i, name in enumerate(("regularized", "standard")):
        fit = report.fits[name]
        lo, hi = fit.ci()
        mine = cmp.asymptotes[i]
        assert cmp.E[i] == pytest.approx(fit.C, abs=1e-9)
        assert (mine.lo, mine.hi) == pytest.approx((lo, hi), abs=1e-9)
        assert (mine.why_not is None) == (reportable(fit) is None)
        # next: the same best cells as settled size points (one seed each)
        best = cells.cells[name]
        pts = SizePoints(best.select("N", pl.col("mean").alias("loss"), pl.col("seeds").alias("m"),
                                     pl.lit(True).alias("settled")), 0.0, 0)
        nxt = fit_target(pts)
        assert nxt.E == pytest.approx(fit.C, abs=1e-9)
        assert nxt.ci == pytest.approx((lo, hi), abs=1e-9)
