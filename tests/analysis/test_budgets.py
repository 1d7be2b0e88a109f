"""A recipe's asymptote and multiplier at each budget U (``analysis.recipes.budgets``),
on synthetic sweeps whose truth is known: the standard recipe's best loss follows
L(U) = 0.9 / u^0.3 + 1.6 (u = U / 1e6) and the regularized recipe's asymptote at budget U is
L(m U), i.e. Kim et al.'s multiplier at U is m exactly."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.recipes.budgets import budget_asymptotes, budget_lines
from analysis.recipes.infinite_compute import analyze

SIZES = np.array([5.6e3, 9.7e3, 14.5e3, 26e3, 41e3, 80e3, 132e3, 271e3])
BUDGETS = (8192, 16384, 32768, 65536, 131072)
U0 = 32768


def _std_law(u):
    return 0.9 / (np.asarray(u, float) / 1e6) ** 0.3 + 1.6


def _runs(mult: dict[int, float], noise: float = 0.002, seed: int = 0) -> pl.DataFrame:
    """Standard (wd 0.1) at every budget, flat in N at exactly L(U) (its best observed loss is
    the truth, so the true multiplier is m); regularized (wd 3) at the budgets of ``mult``:
    0.02 / x^0.5 + L(m U) plus N(0, noise^2) over the sizes (all 8 at U0, the 6 largest
    elsewhere)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in BUDGETS:
        sizes = SIZES if u == U0 else SIZES[2:]
        for tag, wd in (("std", 0.1), ("reg", 3.0)):
            if tag == "reg" and u not in mult:
                continue
            x = sizes / 1e6
            clean = (np.full(x.size, _std_law(u)) if tag == "std"
                     else 0.02 / x**0.5 + _std_law(mult[u] * u))
            loss = clean + (noise * rng.standard_normal(x.size) if tag == "reg" else 0.0)
            block = "tuned" if u == U0 else f"tuned-U{u}"
            rows += [{"N": float(n), "D_unique": u, "state": "COMPLETED", "final_loss": float(v),
                      "name": f"{tag}-{u}-{i}", "optim.weight_decay": wd, "block": block}
                     for i, (n, v) in enumerate(zip(sizes, loss))]
    return pl.DataFrame(rows)


def test_a_constant_multiplier_is_found_at_every_budget_and_said_to_hold():
    """m = 2.5 at U = 16k, 32k and 64k: every budget is fitted and has a multiplier within
    15% of 2.5 (noise 0.002 nats moves it by ~1-2%), its E's interval covers the truth, and
    the trend line says 'holds'."""
    res = analyze(_runs({16384: 2.5, 32768: 2.5, 65536: 2.5}))
    table = res.budgets.filter(pl.col("recipe") == "regularized").sort("U")
    assert table["U"].to_list() == [16384.0, 32768.0, 65536.0]  # not 8k, 128k: standard runs only
    assert table["sizes"].to_list() == [6, 8, 6]
    assert table["why"].null_count() == 3 and table["m_why"].null_count() == 3, table
    for row in table.iter_rows(named=True):
        assert abs(row["multiplier"] / 2.5 - 1) < 0.15, row
        assert row["m_lo"] < row["multiplier"] < row["m_hi"], row
    lines = budget_lines(res.budgets, res.reference)
    assert lines[-1].startswith("regularized: the multiplier holds"), lines
    assert lines[-1].endswith("the gain persists: every budget's interval lies above x1"), lines
    assert not any(line.startswith("standard") for line in lines), lines


SEEDS = 24
MIN_COVERED = 20
"""Coverage of the multiplier's 95% interval over seeds 0-23 (measured: 22, 21, 22 of 24 at
16k, 32k, 64k; the asymptote's own t-interval covers as often). >= 20 of 24 (83%) leaves
room for the t-interval's known undercoverage with 3-5 residual dof of a nonlinear fit;
the old interval, which drew E from its plain standard error instead of the t-widened one
(``asymptotes.t_scaled_se``), covered 2.5 in 34, 33, 33 of 40."""


def test_the_multiplier_interval_covers_the_truth_across_seeds():
    covered = {16384.0: 0, 32768.0: 0, 65536.0: 0}
    for seed in range(SEEDS):
        for row in analyze(_runs({16384: 2.5, 32768: 2.5, 65536: 2.5}, seed=seed)).budgets.iter_rows(named=True):
            covered[row["U"]] += row["m_lo"] <= 2.5 <= row["m_hi"]
    assert min(covered.values()) >= MIN_COVERED, covered


def test_a_growing_multiplier_is_said_to_grow():
    """m = 1.5 at 16k and 6 at 64k: the intervals separate, so the line says 'grows'."""
    res = analyze(_runs({16384: 1.5, 32768: 3.0, 65536: 6.0}))
    lines = budget_lines(res.budgets, res.reference)
    assert lines[-1].startswith("regularized: the multiplier grows from U = 16,384 to U = 65,536"), lines


def test_a_budget_without_a_gain_is_named():
    """A budget whose multiplier interval reaches x1 is named instead of a claim that the gain
    persists (the table as ``budget_asymptotes`` writes it)."""
    from analysis.recipes.budgets import SCHEMA

    rows = [("regularized", 16384.0, 6, 2.3, 2.2, 2.4, None, 2.4, 1.3, 0.9, 1.9, None),
            ("regularized", 32768.0, 8, 2.0, 1.95, 2.05, None, 2.2, 2.3, 1.9, 2.8, None)]
    lines = budget_lines(pl.DataFrame(rows, schema=SCHEMA, orient="row"), "standard")
    assert lines[-1] == ("regularized: the multiplier holds (the intervals overlap) from U = 16,384 to "
                         "U = 32,768 (x1.30 -> x2.30); no gain shown at U = 16,384 (its interval reaches x1)")


def test_one_budget_gives_no_table():
    """A recipe at one budget only (the usual sweep) has no per-budget rows."""
    res = analyze(_runs({32768: 2.5}))
    assert res.budgets.height == 0


def test_an_unidentified_budget_keeps_its_reason_and_has_no_multiplier():
    """At 64k the regularized loss rises with N (overfitting): its asymptote is refused with
    the report's reason, and no multiplier is computed from it; the other budgets stand."""
    runs = _runs({16384: 2.5, 32768: 2.5, 65536: 2.5})
    rise = (pl.col("D_unique") == 65536) & (pl.col("optim.weight_decay") == 3.0)
    ranks = pl.col("N").rank("dense").over(pl.col("D_unique"), pl.col("optim.weight_decay"))
    runs = runs.with_columns(pl.when(rise & (ranks > 3)).then(pl.col("final_loss") + 0.1 * (ranks - 3))
                             .otherwise(pl.col("final_loss")).alias("final_loss"))
    table = analyze(runs).budgets.sort("U")
    row = table.row(2, named=True)
    assert row["U"] == 65536 and row["why"] is not None
    assert row["m_why"] == "the asymptote is not identified" and np.isnan(row["multiplier"])
    assert table["m_why"].to_list()[:2] == [None, None]


def test_a_budget_without_a_reference_run_says_so():
    runs = _runs({16384: 2.5, 32768: 2.5, 65536: 2.5}).filter(
        ~((pl.col("D_unique") == 65536) & (pl.col("optim.weight_decay") == 0.1)))
    res = analyze(runs)
    row = res.budgets.filter(pl.col("U") == 65536).row(0, named=True)
    assert row["m_why"] == "no run of the standard recipe at U = 65,536", row


@pytest.mark.parametrize("law", ["no data law of the standard recipe (2 points)"])
def test_no_data_law_is_the_reason(law):
    """Called directly with a data law that could not be fitted: the reason is carried."""
    runs = _runs({16384: 2.5, 32768: 2.5})
    frame = runs.with_columns(pl.col("final_loss").alias("loss"), pl.col("D_unique").cast(pl.Float64).alias("U"))
    tagged = {"regularized": frame.filter(pl.col("optim.weight_decay") == 3.0)}
    table = budget_asymptotes(tagged, ["block", "optim.weight_decay", "N", "D_unique"],
                              pl.DataFrame({"U": [16384.0], "loss": [2.0]}), law, "standard")
    assert table["m_why"].to_list() == [law, law]
