"""``scalelab next`` on any study: the candidate space is the whole spec (blocks, grids, zip
groups, plus more seeds of its cells), recipes are ``analysis.recipes.rows``' (extra.recipe,
Kim's tuned blocks, or ``--recipe`` joining blocks), and the written spec launches exactly the
proposed runs. Sweeps are synthetic: a runs.parquet made from the spec's plan with losses
from a known law per recipe (muon's E lower), nothing trained."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from _cli_exit import run_cli as run

from scalelab.adaptive.any_study import load_any_study
from scalelab.sweep.plan.datasets import dataset_facts
from scalelab.sweep.plan.expand import load_plan
from scalelab.sweep.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
MUON = ROOT / "sweeps" / "examples" / "muon_vs_adamw.yaml"
DEMO = ROOT / "sweeps" / "demo.yaml"
E = {"adamw": 3.0, "muon": 2.8}


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def fake_sweep(spec: Path, sweep: Path) -> pl.DataFrame:
    """A finished sweep of ``spec``: every planned run COMPLETED, loss = E_recipe +
    2 (N/1e6)^-0.35 (+0.05 off the best lr / tuned cell) + noise."""
    plan = load_plan(spec).table
    (sweep / "runs").mkdir(parents=True)
    shutil.copy(spec, sweep / "spec.yaml")
    rec = plan["extra.recipe"].to_list() if "extra.recipe" in plan.columns else [None] * plan.height
    N = plan["N"].to_numpy().astype(float)
    off = np.array([0.0 if b.endswith("x1") or b == "tuned-best" else 0.05
                    for b in plan["block"].to_list()])
    loss = (np.array([E.get(r, 3.0) for r in rec]) + 2.0 * (N / 1e6) ** -0.35 + off
            + np.random.default_rng(0).normal(0, 0.005, plan.height))
    runs = plan.with_columns(pl.lit("COMPLETED").alias("state"), pl.Series("final_loss", loss),
                             pl.Series("best_loss", loss))
    if "extra.recipe" in runs.columns:
        runs = runs.with_columns(pl.col("extra.recipe").alias("recipe"))
    runs.write_parquet(sweep / "runs.parquet")
    return runs


def study(spec: Path, **kw):
    loaded = load_spec(spec)
    return load_any_study(loaded, datasets=dataset_facts(loaded), **kw)


def candidates(spec: Path) -> set[str]:
    return set(study(spec).candidates["run_id"].to_list())


def check_written(path: Path, out: str, spec: Path, runs: pl.DataFrame, tmp_path, capsys) -> list[str]:
    """The written spec's runs: candidates, never a finished run, each printed, and
    `scalelab sweep FILE --dry-run` plans exactly them."""
    ids = load_plan(path).table["run_id"].to_list()
    assert ids and len(ids) == len(set(ids))
    assert set(ids) <= candidates(spec)
    assert not set(ids) & set(runs["run_id"].to_list())
    code, dry, err = run(["sweep", path, "--dry-run", "--root", tmp_path / "dry"], capsys)
    assert code == 0, err
    assert f"{len(ids)} runs" in dry and f"launch {len(ids)}, skip 0" in dry
    return ids


@pytest.mark.parametrize("target", ["ranking", "muon.E", "adamw.E"])
def test_next_on_a_muon_vs_adamw_study_proposes_runs_of_the_spec(tmp_path, capsys, target):
    sweep = tmp_path / "root" / "muon_vs_adamw"
    runs = fake_sweep(MUON, sweep)
    path = tmp_path / "next.yaml"
    code, out, err = run(["next", sweep, "--target", target, "-n", 4, "-o", path], capsys)
    assert code == 0, err
    assert f"wrote {path}: 4 run(s)" in out
    assert "recipes adamw, muon from the runs' `recipe` column" in out
    if target == "ranking":
        assert "ranking muon < adamw by E" in out and "5 settled sizes per recipe" in out
    else:
        assert f"{target} = " in out and "from 5 settled sizes" in out
    ids = check_written(path, out, MUON, runs, tmp_path, capsys)
    assert all(rid in out for rid in ids)
    blocks = set(load_plan(path).table["block"].to_list())
    if target != "ranking":
        assert all(b.startswith(f"adaptive-{target.split('.')[0]}-") for b in blocks), blocks


def test_next_on_the_demo_layout_with_zip_groups_proposes_runs(tmp_path, capsys):
    """The demo's tuned/tuned-best blocks are zip groups (the old study refused them)."""
    sweep = tmp_path / "root" / "demo_infinite_compute"
    runs = fake_sweep(DEMO, sweep)
    path = tmp_path / "next.yaml"
    code, out, err = run(["next", sweep, "-n", 3, "-o", path], capsys)
    assert code == 0, err
    assert "regularized.E = " in out and "from 7 settled sizes" in out
    assert "recipes standard, regularized from blocks 'tuned', 'tuned-*'" in out
    ids = check_written(path, out, DEMO, runs, tmp_path, capsys)
    assert len(ids) == 3
    assert set(load_plan(path).table["block"].to_list()) <= {"adaptive-tuned", "adaptive-tuned-best"}


def test_next_on_a_spec_before_any_run_settles_sizes_of_both_recipes(tmp_path, capsys):
    """Nothing run yet: the proposals are planned runs of the spec (settle actions)."""
    path = tmp_path / "next.yaml"
    code, out, err = run(["next", MUON, "--target", "ranking", "-n", 6, "-o", path,
                          "--root", tmp_path / "root"], capsys)
    assert code == 0, err
    assert "0 of 100 candidate runs finished (40 planned by the spec" in out
    plan = load_plan(MUON).table
    ids = load_plan(path).table["run_id"].to_list()
    assert len(ids) == 6 and set(ids) <= set(plan["run_id"].to_list())


def test_recipe_with_block_alternatives_joins_blocks_into_one_recipe(tmp_path, capsys):
    sweep = tmp_path / "root" / "muon_vs_adamw"
    runs = fake_sweep(MUON, sweep)
    path = tmp_path / "next.yaml"
    code, out, err = run(["next", sweep, "--target", "fast.E", "-n", 2, "-o", path,
                          "--recipe", "fast=block=muon-x1|muon-x3",
                          "--recipe", "slow=block=adamw-x1|adamw-x3"], capsys)
    assert code == 0, err
    assert "recipes fast, slow from --recipe filters" in out and "fast.E = " in out
    ids = check_written(path, out, MUON, runs, tmp_path, capsys)
    blocks = set(load_plan(path).table["block"].to_list())
    assert blocks <= {"adaptive-muon-x1", "adaptive-muon-x3"} and ids
    joined = study(MUON, filters={"fast": ("block=muon-x1|muon-x3",)})
    fast = joined.candidates.filter(joined.recipes["fast"])
    assert set(fast["block"].to_list()) == {"muon-x1", "muon-x3"}


@pytest.mark.parametrize(("argv", "said"), [
    (["--target", "muon.e"], "unknown target 'muon.e' (did you mean 'muon.E'?)"),
    (["--recipe", "a=blok=muon-x1"], "(did you mean 'block'?)"),
    (["--target", "ranking", "--recipe", "a=block=muon-x1"], "ranking needs >= 2 recipes"),
])
def test_bad_targets_on_any_study_are_one_line_exit_2(tmp_path, capsys, argv, said):
    sweep = tmp_path / "root" / "muon_vs_adamw"
    fake_sweep(MUON, sweep)
    code, out, err = run(["next", sweep, *argv], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and said in err, err


def test_next_report_and_compare_agree_on_the_demo_layout(tmp_path, capsys):
    """One rule (issue 34): on the demo's layout ``next`` prints the verdict ``compare``
    prints (the standard recipe has no E of its own here: 4 sizes), and the same E with the
    same interval for the regularized recipe."""
    sweep = tmp_path / "root" / "demo_infinite_compute"
    fake_sweep(DEMO, sweep)
    code, cmp, err = run(["compare", sweep, "standard", "regularized"], capsys)  # the report's order
    assert code == 0, err
    verdict = cmp.splitlines()[1]
    assert verdict.startswith(("regularized beats standard", "standard beats regularized",
                               "standard vs regularized")), cmp
    code, out, err = run(["next", sweep, "--target", "ranking", "-n", 2,
                          "-o", tmp_path / "n.yaml"], capsys)
    assert code == 0, err
    assert f"the report's verdict now: {verdict}" in out, (verdict, out)
    code, out, err = run(["next", sweep, "-n", 2, "-o", tmp_path / "e.yaml"], capsys)
    assert code == 0, err
    e = cmp.split("E(regularized) = ")[1].split(";")[0].split(", E(")[0]  # '1.9, 95% CI (...)'
    assert f"regularized.E = {e}" in out, (e, out)
