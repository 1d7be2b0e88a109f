"""``scalelab compare`` and ``scalelab report`` print one verdict on one sweep
(``analysis.recipes.verdicts``; Kim et al. 2025, "Pre-training under infinite compute",
arXiv 2509.14786).

A synthetic sweep with known truth: the regularized recipe follows A/x^B + E (x = N / 1e6,
E = 1.95), the standard recipe overfits (its loss is U-shaped in log N, lowest 2.20 at
N = 80k: no asymptote), every cell with 2 seeds (SD 0.01: the replicate sigma). The rule's
answer: regularized wins by at least (standard's best seed mean - 2 sigma/sqrt(2)) - E_hi.
Before compare used the rule it printed the bootstrap's "no winner" Delta E CI here (a CI of
an unidentified E reaching far above 0).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis.recipes.infinite_compute import analyze
from analysis.recipes.verdicts import recipe_level, verdict_lines
from scalelab.cli import main

SIZES = (5.6e3, 1e4, 1.5e4, 2.6e4, 4.1e4, 8e4, 1.32e5, 2.71e5)
SEED_SD = 0.01


def _truth(recipe: str, n: float) -> float:
    if recipe == "regularized":
        return 0.05 / (n / 1e6) ** 0.45 + 1.95
    return 2.20 + 0.06 * np.log(n / 8e4) ** 2  # overfits past 80k


def runs_table(seed: int = 0) -> pl.DataFrame:
    """One COMPLETED run per (recipe, size, seed), as ``scalelab collect`` writes them."""
    rng = np.random.default_rng(seed)
    rows = [(recipe, n, wd, s, _truth(recipe, n) + SEED_SD * rng.standard_normal())
            for recipe, wd in (("standard", 0.1), ("regularized", 1.0))
            for n in SIZES for s in range(2)]
    frame = pl.DataFrame(rows, schema=["recipe", "N", "optim.weight_decay", "seed", "final_loss"],
                         orient="row")
    return frame.with_columns(
        pl.format("r{}", pl.int_range(pl.len())).alias("run_id"),
        pl.format("{}_{}", "recipe", pl.int_range(pl.len())).alias("name"),
        pl.lit("COMPLETED").alias("state"), pl.lit(32768.0).alias("D_unique"),
        pl.lit(64.0).alias("data.epochs"), (6 * pl.col("N") * 32768 * 64).alias("flops"))


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def _compare(tmp_path, capsys, frame, a: str, b: str) -> str:
    folder = tmp_path / "sweep"
    folder.mkdir(exist_ok=True)
    frame.write_parquet(folder / "runs.parquet")
    with pytest.raises(SystemExit) as done:
        main(["compare", str(folder), a, b])
    out, err = capsys.readouterr()
    assert int(done.value.code or 0) == 0 and err == "", err
    return out


def test_compare_prints_the_reports_verdict(tmp_path, capsys):
    frame = runs_table()
    res = analyze(frame)
    (report_line,) = verdict_lines(res)  # standard vs regularized, the report's order
    out = _compare(tmp_path, capsys, frame, "standard", "regularized")
    assert out.splitlines()[1] == report_line
    assert report_line.startswith("regularized beats standard at infinite compute by at least ")
    assert "from 32 replicate seeds in 16 cells" in report_line  # one sigma, both commands


def test_the_margin_is_the_rules_with_known_numbers(tmp_path, capsys):
    """The margin is standard's best seed mean - 2 sigma/sqrt(2) - regularized's CI upper
    end, sigma pooled over every cell's 2 seeds, to 1e-9; compare prints it, not a Delta E CI."""
    frame = runs_table(seed=1)
    res = analyze(frame)
    reg, std = recipe_level(res, "regularized"), recipe_level(res, "standard")
    assert reg.identified and not std.identified
    pairs = frame.group_by("recipe", "N").agg(pl.col("final_loss"))
    groups = [np.asarray(v) for v in pairs["final_loss"].to_list()]
    sigma = float(np.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups) / len(groups)))
    means = frame.filter(pl.col("recipe") == "standard").group_by("N").agg(pl.col("final_loss").mean())
    best = float(means["final_loss"].min())
    assert std.value == pytest.approx(best, abs=1e-12)
    assert std.sigma == pytest.approx(sigma / np.sqrt(2), abs=1e-12)
    margin = best - 2 * sigma / np.sqrt(2) - reg.hi
    assert margin > 0  # the truth: 2.20 against E = 1.95
    out = _compare(tmp_path, capsys, frame, "regularized", "standard")
    line = out.splitlines()[1]
    assert line.startswith(f"regularized beats standard at infinite compute by at least {margin:.3g} nats")
    assert "no winner" not in out and "paired bootstrap" not in out
    (report_line,) = verdict_lines(res)
    assert line == report_line


def demo_like(seed: int = 3, noise: float = 0.02) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The demo's layout: one seed per cell (SD ``noise``), and an ensemble of 4 members at
    N = 26k in the regularized cell (member 0 is that tuned run; members 1-3 an ``ensemble``
    block whose config columns are unset), with its evals (``member_run_ids``). Seed 3: the
    bootstrap's CI of E_reg - E_std reached above 0, so compare printed "no winner"."""
    rng = np.random.default_rng(seed)
    rows = [(recipe, n, wd, "tuned", 0, _truth(recipe, n) + noise * rng.standard_normal())
            for recipe, wd in (("regularized", 1.0), ("standard", 0.1)) for n in SIZES]
    n_ens = SIZES[3]
    rows += [(None, n_ens, None, "ensemble", k, _truth("regularized", n_ens) + noise * rng.standard_normal())
             for k in (1, 2, 3)]
    frame = pl.DataFrame(rows, schema={"recipe": pl.String, "N": pl.Float64, "optim.weight_decay": pl.Float64,
                                       "block": pl.String, "member": pl.Int64, "final_loss": pl.Float64},
                         orient="row").with_columns(
        pl.format("r{}", pl.int_range(pl.len())).alias("run_id"),
        pl.format("run{}", pl.int_range(pl.len())).alias("name"),
        pl.lit("COMPLETED").alias("state"), pl.lit(32768.0).alias("D_unique"))
    members = frame.filter((pl.col("N") == n_ens) & (pl.col("recipe").fill_null("regularized") == "regularized")
                           & (pl.col("optim.weight_decay").fill_null(1.0) == 1.0)).sort("member")
    ids = ",".join(members["run_id"].to_list())
    alone = members["final_loss"].to_list()
    evals = [("e0", k, "logits", None, 0.12 / k + float(np.mean(alone)) - 0.12) for k in (1, 2, 3, 4)]
    evals += [("e0", 1, "member", m, loss) for m, loss in enumerate(alone)]
    ens = pl.DataFrame(evals, schema={"run_id": pl.String, "members": pl.Int64, "method": pl.String,
                                      "member": pl.Int64, "loss": pl.Float64}, orient="row")
    return frame, ens.with_columns(pl.lit(ids).alias("member_run_ids"), pl.lit(int(n_ens)).alias("N"))


def test_an_overfitting_recipe_gets_the_rules_winner_not_a_delta_e_ci(tmp_path, capsys):
    """Standard is not identified (it overfits); regularized's CI lies below standard's best
    - 2 sigma, sigma from the 4 ensemble members (member 0 joined through the evals): the
    rule names the winner, in compare as in the report."""
    frame, ens = demo_like()
    res = analyze(frame, ens)
    report_line = verdict_lines(res)[0]
    folder = tmp_path / "sweep"
    (folder / "ensembles").mkdir(parents=True)
    ens.write_parquet(folder / "ensembles" / "evals.parquet")
    out = _compare(tmp_path, capsys, frame, "regularized", "standard")
    assert "no winner" not in out and "ΔE" not in out.splitlines()[1], out
    assert out.splitlines()[1] == report_line
    assert report_line.startswith("regularized beats standard at infinite compute by at least ")
    assert "from 4 replicate seeds in 1 cell" in report_line
