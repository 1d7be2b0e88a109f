"""The report's verdicts: a winner only where both laws are identified and the paired
bootstrap's CI excludes 0; otherwise one line with the reason."""

from __future__ import annotations

import numpy as np
import polars as pl

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
    assert "beats" not in line and "no winner" in line, line


def test_an_unidentified_law_gives_no_verdict_and_says_why():
    res = analyze(_runs(2.10, 1.95, rising=True))
    (line,) = verdict_lines(res)
    assert line.startswith("standard vs regularized: no verdict (standard vs N "), line
