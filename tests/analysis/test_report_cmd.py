"""``scalelab report SWEEP`` on a small real sweep (debug backend) and on runs tables built
to miss sections: the sections present, the "what is missing" lines, collect-first, bad
input, and no number ever written for an unidentified fit."""

from __future__ import annotations

import shutil

import polars as pl
import pytest
from _cli_exit import exit_code as run

from analysis.recipes.infinite_compute import analyze


@pytest.fixture()
def sweep_copy(tiny_sweep, tmp_path):
    return shutil.copytree(tiny_sweep, tmp_path / tiny_sweep.name)


def test_report_on_a_real_sweep_collects_first_and_writes_every_section(sweep_copy, capsys):
    (sweep_copy / "runs.parquet").unlink()
    assert run(["report", str(sweep_copy), "--bootstrap", "10"]) == 0
    out = capsys.readouterr().out
    assert "collecting" in out and (sweep_copy / "runs.parquet").is_file()
    report = sweep_copy / "report"
    ic = (report / "infinite_compute.md").read_text()
    for heading in ("## Sections", "## Asymptotes (N -> infinity)", "## Best loss per model size",
                    "## Ensembles", "## Distilled students", "## Data efficiency vs the standard recipe"):
        assert heading in ic
    assert "recipes from the runs' `recipe` column" in out and "standard (5 sizes), regularized (5 sizes)" in out
    for recipe in ("standard", "regularized"):  # each fitted with a CI, or said why not
        line = next(s for s in out.splitlines() if s.strip().startswith(f"{recipe} vs N:"))
        assert "95% CI" in line or "not identified" in line or "need >=" in line
    # What this sweep cannot support, said exactly.
    assert "ensembles: no ensembles/evals.parquet — run `scalelab ensemble SWEEP`" in out
    assert "distillation: no student runs" in out
    # One joint law per recipe: standard (its tuned runs and the untagged data block, the
    # reference recipe's budgets) has 2 epochs everywhere, so no single-epoch base law;
    # regularized sees one D.
    assert "joint law, standard (DataConstrained): not fitted: stage 1 needs" in out
    assert "joint law, regularized over (N, D): one value of D, need >= 2" in out
    assert "run(s) belong to no recipe" in out  # the untagged D=512 run
    md = (report / "report.md").read_text()
    assert "## Sections" in md
    # One rule: report.md's recipe laws say what infinite_compute.md says, reason for reason.
    for name in ("standard", "regularized"):
        law = next(ln for ln in out.splitlines() if ln.strip().startswith(f"power law in N, {name}:"))
        ic_line = next(ln for ln in out.splitlines() if ln.strip().startswith(f"{name} vs N:"))
        assert law.split(":", 1)[1].strip() == ic_line.split(":", 1)[1].strip(), (law, ic_line)
    assert (report / "recipes.png").stat().st_size > 10_000 and (report / "recipes.svg").is_file()
    # Fresh runs.parquet: a second report does not collect again.
    assert run(["report", str(sweep_copy), "--bootstrap", "0"]) == 0
    assert "collecting" not in capsys.readouterr().out


def test_recipe_filters_and_missing_sizes(sweep_copy, capsys):
    argv = ["report", str(sweep_copy), "--bootstrap", "0",
            "--recipe", "standard=optim.weight_decay=0.1,block=tuned",
            "--recipe", "small=optim.weight_decay=0.8,model.n_layers=2"]
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert "recipes from --recipe filters: standard (5 sizes), small (1 sizes)" in out
    assert "small vs N: 1 size, need >= 4" in out
    ic = (sweep_copy / "report" / "infinite_compute.md").read_text()
    assert "small vs N: 1 size, need >= 4" in ic


@pytest.mark.parametrize("argv, message", [
    (["--recipe", "nonsense"], "expected NAME=COND"),
    (["--recipe", "x=optim.weight_decy=0.1"], "did you mean 'optim.weight_decay'"),
    (["--recipe", "x=optim.weight_decay=abc"], "'abc' is not a number"),
    (["--reference", "nope"], "reference recipe 'nope'"),
    (["--loss-column", "final_los"], "no loss column 'final_los'"),
    (["--bootstrap", "1"], "--bootstrap must be 0 or >= 2"),
])
def test_bad_input_is_one_line_exit_2(tiny_sweep, capsys, argv, message):
    assert run(["report", str(tiny_sweep), "--bootstrap", "0", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _flat_regularized_runs() -> pl.DataFrame:
    """Standard: a clean A/N^B + C law; regularized: flat, up and down (no N-limit)."""
    rows = []
    for i, (n, flat) in enumerate(zip((2e4, 5e4, 1e5, 2e5, 5e5), (3.12, 3.08, 3.11, 3.10, 3.13))):
        std = 0.4 / (n / 1e6) ** 0.5 + 2.6
        for recipe, loss in (("standard", std), ("regularized", flat)):
            rows.append({"name": f"{recipe}{i}", "run_id": f"{recipe[:3]}{i}", "state": "COMPLETED", "N": int(n),
                         "D_unique": 4096, "D_total": 16384, "final_loss": loss, "recipe": recipe})
    return pl.DataFrame(rows)


def test_an_unidentified_fit_gets_no_number(tmp_path, capsys):
    sweep = tmp_path / "flat"
    sweep.mkdir()
    runs = _flat_regularized_runs()
    runs.write_parquet(sweep / "runs.parquet")
    reg = analyze(runs).fits["regularized"]
    assert reg is not None  # fitted, and flagged: C is a mean level
    assert run(["report", str(sweep), "--bootstrap", "10"]) == 0
    out = capsys.readouterr().out
    ic = (sweep / "report" / "infinite_compute.md").read_text()
    md = (sweep / "report" / "report.md").read_text()
    line = next(s for s in out.splitlines() if "regularized vs N:" in s)
    assert "not identified" in line and "the loss rises again with x (the point at x = " in line
    for value in (reg.E, reg.A, reg.B):  # no value of the fit: the rise is stated in the data's numbers
        assert f"{value:.4f}" not in line and f"{value:.3g}" not in line, (value, line)
    std = next(s for s in out.splitlines() if "standard vs N:" in s)
    assert "asymptote 2.6" in std and "95% CI" in std
    for text in (out, ic, md):
        assert f"{reg.E:.4f}" not in text and f"{reg.E:.3f}" not in text and f"{reg.E:.5g}" not in text
    assert "regularized asymptote" not in ic  # no multiplier from it
    assert "power law in N, regularized: not identified" in md
    # No data-scaling fit (one budget U): no multiplier at all, and why.
    assert "the standard recipe has 1 budget(s) U, need >= 5" in out
    assert "| multiplier |" not in ic


def test_a_table_without_recipes_says_so(tmp_path, capsys):
    sweep = tmp_path / "norecipe"
    sweep.mkdir()
    _flat_regularized_runs().drop("recipe").write_parquet(sweep / "runs.parquet")
    assert run(["report", str(sweep), "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "not written: no recipes found" in out and "--recipe NAME=COND" in out
    assert "Not written: no recipes found" in (sweep / "report" / "infinite_compute.md").read_text()
