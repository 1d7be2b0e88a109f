"""analysis.recipes.verdicts's ensemble part: an ensemble's K -> inf limit against a recipe's
asymptote under the one rule, unpaired (a winner only when the intervals separate), on
synthetic recipes and ensembles with known truth (Kim et al. 2025, arXiv 2509.14786)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from test_recipe_verdicts import _runs

from analysis.recipes.infinite_compute import analyze
from analysis.recipes.verdicts import ensemble_levels, recipe_level, verdict_lines

N_ENS = 2.6e4


def _evals(C: float, seed: int = 0) -> pl.DataFrame:
    """Logit-averaged losses of K = 1..6 members at N = 26k on A/K + C (SD 0.002)."""
    rng = np.random.default_rng(seed)
    k = np.arange(1, 7)
    loss = 0.12 / k + C + 0.002 * rng.standard_normal(k.size)
    return pl.DataFrame({"N": [N_ENS] * k.size, "members": k, "method": ["logits"] * k.size,
                         "member": [None] * k.size, "loss": loss},
                        schema_overrides={"member": pl.Int64})


def _line(res, recipe: str) -> str:
    (line,) = [v for v in verdict_lines(res) if v.startswith("ensemble") and f" {recipe}" in v.split(":")[0]]
    return line


def test_a_limit_clearly_below_wins_by_the_gap_between_the_intervals():
    res = analyze(_runs(2.10, 1.95), _evals(1.80))
    (ens,), used = ensemble_levels(res)
    reg = recipe_level(res, "regularized")
    assert ens.lo <= 1.80 <= ens.hi and "each size's K -> inf limit" in used
    line = _line(res, "regularized")
    margin = reg.lo - ens.hi
    assert margin > 0
    assert line.startswith(f"ensemble K->inf at N=26k beats regularized at infinite compute by at "
                           f"least {margin:.3g} nats (95%)"), line
    assert "no joint (N, K -> inf) asymptote" in line


def test_an_overlapping_limit_is_no_verdict_with_the_numbers():
    res = analyze(_runs(2.10, 1.95), _evals(1.95))
    (ens,), _ = ensemble_levels(res)
    reg = recipe_level(res, "regularized")
    assert ens.hi > reg.lo and reg.hi > ens.lo  # the intervals overlap
    line = _line(res, "regularized")
    assert line.startswith("ensemble K->inf at N=26k vs regularized: no verdict: "), line
    low, high = sorted((ens, reg), key=lambda v: v.value)
    overlap = low.hi - high.lo  # the rule's: how far the lower one's upper end reaches past the other's lower end
    assert f"overlap by {overlap:.3g} nats" in line
    assert f"CI {ens.lo:.4g}-{ens.hi:.4g}" in line and f"CI {reg.lo:.4g}-{reg.hi:.4g}" in line


def test_no_ensembles_no_ensemble_line():
    assert not [v for v in verdict_lines(analyze(_runs(2.10, 1.95))) if v.startswith("ensemble")]


def test_unpaired_asymptotes_never_ask_for_a_paired_ci():
    from analysis.recipes.verdicts import RecipeLevel, recipe_verdict

    a = RecipeLevel.asymptote("ensemble", 1.80, 1.78, 1.82)
    b = RecipeLevel.asymptote("regularized", 1.95, 1.90, 2.00)
    v = recipe_verdict(a, b, paired=False)
    assert v.winner == "ensemble" and v.margin == pytest.approx(0.08)
