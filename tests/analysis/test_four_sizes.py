"""A study with 4 sizes gets its number: E with its 1-residual-dof t interval, flagged.

Reference: Kim et al. 2025 ("Pre-training under infinite compute", arXiv 2509.14786) publish
the K -> inf ensemble losses at their four sizes (150M-1.4B on 200M tokens) and the joint
asymptote 3.17; a plain A/N^B + E fit of those four values gives 3.169 with a 1-dof 95% t
interval of 3.02 to 3.32. The report, compare and the demo's engine must print that, flagged,
instead of refusing ("4 sizes, need >= 5"); decisions measured to go wrong on 4 sizes keep
the 5-size rule (identified.MIN_SIZES).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from _cli_exit import exit_code as main

from analysis.fit.identified import MIN_SIZES, MIN_SIZES_E
from analysis.recipes.cells import SizePoints
from analysis.recipes.recipe_asymptote import recipe_asymptote
from analysis.tables.published import KIM


def _kim_points() -> SizePoints:
    x = np.array(KIM["model_sizes_b"]) * 1e3  # x = N / 1e6
    return SizePoints(x, np.array(KIM["ensemble_asymptotes_200m"]), np.ones(4))


def test_kims_four_published_sizes_give_the_papers_asymptote_with_a_flagged_interval():
    res = recipe_asymptote(_kim_points())
    assert res.why_not is None
    assert res.E == pytest.approx(KIM["joint_asymptote"], abs=0.005)  # the paper's 3.17
    assert res.E == pytest.approx(3.169, abs=0.0005)
    assert res.lo == pytest.approx(3.02, abs=0.005) and res.hi == pytest.approx(3.32, abs=0.005)
    assert "1 residual degree of freedom" in res.flag and "t = 12.7" in res.flag
    assert MIN_SIZES_E == 4 and MIN_SIZES == 5  # decisions keep 5


def test_three_sizes_are_still_refused_and_five_are_not_flagged():
    p = _kim_points()
    three = recipe_asymptote(SizePoints(p.x[:3], p.y[:3], p.m[:3]))
    assert three.why_not == "3 sizes, need >= 4" and not np.isfinite(three.lo)
    x5 = np.array([0.15, 0.3, 0.6, 1.4, 3.0]) * 1e3
    five = recipe_asymptote(SizePoints(x5, 3.1 + 1.3 / x5**0.45, np.ones(5)))
    assert five.why_not is None and five.flag is None


def _table(tmp_path):
    """Two recipes at Kim's 4 sizes, 2 seeds each; 'low' sits 0.3 nats below 'high'."""
    rng = np.random.default_rng(0)
    rows = []
    for recipe, E in (("low", 3.0), ("high", 3.3)):
        for n in (150e6, 300e6, 600e6, 1.4e9):
            for seed in (0, 1):
                loss = E + 3.0 * (n / 1e6) ** -0.5 + rng.normal(0, 0.002)
                rows.append({"N": n, "D": 200e6, "loss": loss, "recipe": recipe, "seed": seed})
    path = tmp_path / "runs.csv"
    pl.DataFrame(rows).write_csv(path)
    return path


def test_report_and_compare_print_the_same_flagged_e_on_four_sizes(tmp_path, capsys):
    path = _table(tmp_path)
    assert main(["report", str(path), "--bootstrap", "0", "-q"]) == 0
    out = capsys.readouterr().out
    low = next(ln for ln in out.splitlines() if ln.strip().startswith("low vs N:"))
    assert "asymptote 3.0" in low and "1 residual degree of freedom" in low, low
    assert main(["compare", str(path), "low", "high"]) == 0
    cmp = capsys.readouterr().out
    # the verdict: the intervals alone separate (no paired bootstrap on 4 sizes)
    assert "low beats high at infinite compute" in cmp, cmp
    assert "judged by the two intervals alone" in cmp
    e_low = next(p for p in cmp.split("E(low) = ")[1:])[:6]
    assert e_low in low, (e_low, low)  # the same E in both commands
