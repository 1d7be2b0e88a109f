"""The report's verdicts (``analysis.recipes.verdicts``): two identified laws by the paired
bootstrap's CI of E_A - E_B; a recipe whose loss rises with N by its best observed loss
minus 2 sigma against the other's upper end; otherwise "no verdict" with the numbers."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.recipes.infinite_compute import analyze
from analysis.recipes.verdicts import verdict_lines

SIZES = np.array([5.6e3, 1e4, 1.5e4, 2.6e4, 4.1e4, 8e4, 1.32e5, 2.71e5])


def _runs(E_std: float, E_reg: float, noise: float = 0.003, seed: int = 0, rising: bool = False) -> pl.DataFrame:
    """The standard recipe (wd 0.1) and a regularized cell (wd 1) per size, laws A/x^B + E."""
    rng = np.random.default_rng(seed)
    x = SIZES / 1e6
    std = 0.02 / x**0.5 + E_std + noise * rng.standard_normal(x.size)
    if rising:  # overfitting: the standard loss rises again past the 4th size
        std[4:] += np.linspace(0.05, 0.3, x.size - 4)
    reg = 0.02 / x**0.5 + E_reg + noise * rng.standard_normal(x.size)
    rows = [{"N": n, "D_unique": 32768, "state": "COMPLETED", "final_loss": float(v),
             "name": f"{tag}-{i}", "optim.weight_decay": wd, "block": "tuned"}
            for tag, wd, losses in (("std", 0.1, std), ("reg", 1.0, reg))
            for i, (n, v) in enumerate(zip(SIZES, losses))]
    return pl.DataFrame(rows)


def test_a_clear_winner_is_named_with_its_interval():
    res = analyze(_runs(2.10, 1.95))
    (line,) = verdict_lines(res)
    assert line.startswith("regularized beats standard at infinite compute"), line


def test_equal_asymptotes_name_no_winner():
    res = analyze(_runs(2.0, 2.0, seed=3))
    (line,) = verdict_lines(res)
    assert "beats" not in line and "no verdict" in line and "contains 0" in line, line


def test_an_overfitting_recipe_is_judged_by_its_best_observed_loss():
    """Standard rises past its 4th size (no asymptote): its best observed loss minus 2 sigma
    still lies above regularized's upper end, so the answer is a winner and a margin that
    does not exceed the true gap at the best size."""
    runs = _runs(2.10, 1.95, rising=True)
    res = analyze(runs)
    (line,) = verdict_lines(res)
    assert line.startswith("regularized beats standard at infinite compute by at least "), line
    margin = float(line.split("by at least ")[1].split(" nats")[0])
    std_best = runs.filter(pl.col("optim.weight_decay") == 0.1)["final_loss"].min()
    assert 0 < margin < std_best - 1.95, (margin, std_best)


def test_an_unidentified_law_that_does_not_rise_gives_no_verdict_and_says_why():
    """Four sizes: no law is written (MIN_SIZES), and the standard loss still falls, so
    neither an asymptote nor a best observed loss stands for it."""
    runs = _runs(2.10, 1.95).filter(pl.col("N") <= 2.6e4)
    res = analyze(runs)
    (line,) = verdict_lines(res)
    assert line.startswith("standard vs regularized: no verdict (standard vs N "), line
    assert "does not rise with N" in line, line


@pytest.mark.parametrize("rising", [True, False])
def test_each_recipe_is_fitted_once_per_analysis(monkeypatch, rising):
    """The verdicts read the analysis' own fit of each recipe (issue 38: ``level_of`` and the
    paired bootstrap's start used to fit the same points again): after ``analyze``, the
    verdict lines make no A/x^B + E fit (the bootstrap's resamples fit through ``fit_law``,
    not this engine), and each level's E is that fit's E to the bit. Rising: standard is
    held to its best observed loss; not rising: two asymptotes by the paired bootstrap."""
    import analysis.fit.power_law as power_law
    from analysis.recipes.verdicts import recipe_level

    res = analyze(_runs(2.10, 1.95, rising=rising))
    calls = []
    real = power_law.fit_kim
    monkeypatch.setattr(power_law, "fit_kim", lambda *a, **k: calls.append(1) or real(*a, **k))
    (line,) = verdict_lines(res)
    reg = recipe_level(res, "regularized")
    assert calls == [] and line.startswith("regularized beats standard"), line
    assert ("paired" in line) == (not rising), line
    assert res.judged["regularized"].fit is res.fits["regularized"]
    assert reg.kind == "asymptote" and reg.value == res.fits["regularized"].E
