"""``scalelab next SWEEP``: proposals never include a run the sweep has launched, and the
written spec launches (``scalelab sweep FILE``) exactly the proposed runs.

The study is a small grid (8 twin sizes x 3 epochs x 3 weight decays x 2 seeds) trained by
``adaptive_train:train`` (a known law + noise) on the debug backend, in this process.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _cli_exit import run_cli as run
from adaptive_train import PRESETS, spec_text

from scalelab.adaptive.study import load_study
from scalelab.sweep.plan.expand import load_plan
from scalelab.sweep.spec.load import load_spec

TARGET = "adaptive_train:train"


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def launched_ids(sweep: Path) -> set[str]:
    """Run ids with a state in the sweep's runs.parquet (collected now)."""
    from scalelab.sweep.view.collect import collect

    runs = collect(sweep)
    return set(runs.filter(pl.col("state").is_not_null())["run_id"].to_list())


def test_next_never_proposes_a_launched_run_and_its_block_launches_exactly_them(tmp_path, capsys):
    spec = write(tmp_path, spec_text())
    root = tmp_path / "root"
    sweep = root / "nx"
    study = load_study(load_spec(spec))
    candidates = set(study.candidates["run_id"].to_list())
    block = tmp_path / "next.yaml"
    proposed: list[str] = []
    for cycle in range(6):
        where = spec if cycle == 0 else sweep  # later cycles: the sweep directory
        code, out, err = run(["next", where, "-n", 4, "-o", block, "--root", root], capsys)
        assert code == 0, err
        assert f"wrote {block}: 4 run(s)" in out
        ids = load_plan(block).table["run_id"].to_list()  # loads and expands
        assert len(ids) == len(set(ids)) == 4 and set(ids) <= candidates
        assert all(rid in out for rid in ids)  # the printed table lists them
        done = launched_ids(sweep) if (sweep / "plan.parquet").exists() else set()
        assert not set(ids) & done and not set(ids) & set(proposed)
        proposed += ids
        code, out, err = run(["sweep", block, "--root", root, "--executor", "debug",
                              "--train-target", TARGET], capsys)
        assert code == 0 and "4 launched on debug, 0 skipped" in out, out + err
        assert set(ids) <= launched_ids(sweep)
    logs = [len((d / "invocations.log").read_text().splitlines()) for d in (sweep / "runs").iterdir()]
    assert logs == [1] * 24  # 24 proposals, each trained once
    assert (sweep / "adaptive" / "study.yaml").read_text() == spec.read_text()


def test_runs_done_by_a_plain_sweep_are_never_proposed(tmp_path, capsys):
    """Runs of the same sweep launched under other names (a plain `scalelab sweep` of part
    of the grid) are recognised by their run ids."""
    root = tmp_path / "root"
    part = write(tmp_path, spec_text(presets=PRESETS[-2:]), "part.yaml")
    code, out, _ = run(["sweep", part, "--root", root, "--executor", "debug", "--train-target", TARGET], capsys)
    assert code == 0 and "36 launched" in out
    done = launched_ids(root / "nx")
    spec = write(tmp_path, spec_text())
    code, out, err = run(["next", spec, "-n", 8, "--root", root], capsys)
    assert code == 0, err
    path = root / "nx" / "adaptive" / "next.yaml"  # the default -o
    ids = set(load_plan(path).table["run_id"].to_list())
    assert len(ids) == 8 and not ids & done
    assert "2 settled sizes" in out or "no interval yet" in out


@pytest.mark.parametrize(("argv", "said"), [
    (["--target", "regularized.e"], "unknown target 'regularized.e' (did you mean 'regularized.E'?)"),
    (["--target", "multiplier"], "multiplier: the sweep has no runs yet to fit the reference"),
    (["--target", "ranking", "--recipe", "a=optim.wd=0.1"],
     "recipe 'a': 'optim.wd' is not a tuned axis of the study (did you mean 'optim.weight_decay'?)"),
    (["--target", "ranking", "--recipe", "a=optim.weight_decay=0.2"],
     "recipe 'a': optim.weight_decay = 0.2 is not on the study's grid [0.1, 0.3, 1.0]"),
    (["--target", "ranking", "--recipe", "a=optim.weight_decay=x"],
     "recipe 'a': optim.weight_decay=x: expected numbers separated by |"),
    (["--target", "heavy.E", "--recipe", "light=optim.weight_decay=0.1|0.3"],
     "unknown target 'heavy.E'"),
])
def test_bad_targets_and_recipes_are_one_line_exit_2(tmp_path, capsys, argv, said):
    spec = write(tmp_path, spec_text())
    code, out, err = run(["next", spec, *argv, "--root", tmp_path], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and said in err, err


def test_ranking_target_plans_both_recipes_and_names_the_order(tmp_path, capsys):
    """--target ranking on Kim's default recipes of the grid: standard (weight decay 0.1)
    and regularized (every cell). The proposals carry their recipe; once both recipes have
    fits, the line names their order by E."""
    spec = write(tmp_path, spec_text())
    root = tmp_path / "root"
    block = tmp_path / "next.yaml"
    recipes: set[str] = set()
    for _ in range(8):
        code, out, err = run(["next", spec, "--target", "ranking", "-n", 8, "-o", block,
                              "--root", root], capsys)
        assert code == 0, err
        if "nothing to propose" in out:
            break
        table = out[out.index("proposed runs"):]
        recipes |= {r for r in ("standard", "regularized") if f" {r} " in table}
        code, out, err = run(["sweep", block, "--root", root, "--executor", "debug",
                              "--train-target", TARGET], capsys)
        assert code == 0, out + err
    assert recipes == {"standard", "regularized"}
    code, out, err = run(["next", spec, "--target", "ranking", "-n", 1, "-o", block,
                          "--root", root], capsys)
    assert code == 0, err
    # the synthetic optimum leaves weight decay 0.1 above 15k parameters: the standard
    # recipe's loss rises with N, so the report (and next) writes no E for it: the line
    # says so with the report's reason, and no order
    assert "ranking: none (no interval on E: standard (not identified: the loss rises again " \
        "with x" in out, out


def test_bad_loss_column_is_one_line_exit_2(tmp_path, capsys):
    spec = write(tmp_path, spec_text())
    code, out, err = run(["next", spec, "--loss-column", "final", "--root", tmp_path], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "did you mean 'final_loss'" in err, err


def test_help_names_the_targets(capsys):
    code, out, _ = run(["next", "-h"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "ranking (the recipes' order by E)" in text and "--recipe" in text


def test_budget(tmp_path, capsys):
    """--budget needs priced runs (GPU-hours); a budget nothing fits proposes nothing."""
    unpriced = write(tmp_path, spec_text(priced=False), "unpriced.yaml")
    code, out, err = run(["next", unpriced, "--budget", 1, "--root", tmp_path], capsys)
    assert code == 2 and err.count("\n") == 1 and "launcher.flops_per_gpu_s" in err, err
    code, out, err = run(["next", unpriced, "--root", tmp_path, "-n", 2], capsys)
    assert code == 0 and "FLOPs" in out  # without --budget: scored per FLOP
    spec = write(tmp_path, spec_text())
    out_file = tmp_path / "b.yaml"
    code, out, err = run(["next", spec, "--budget", 1e-9, "-o", out_file, "--root", tmp_path], capsys)
    assert code == 0 and "nothing to propose: no proposal fits --budget" in out
    assert not out_file.exists()


def test_a_study_needs_tuned_axes_and_one_cell_per_size(tmp_path, capsys):
    flat = spec_text().replace("  data.epochs: [2, 4, 8]\n  optim.weight_decay: [0.1, 0.3, 1]\n", "")
    code, _, err = run(["next", write(tmp_path, flat, "flat.yaml"), "--root", tmp_path], capsys)
    assert code == 2 and err.count("\n") == 1 and "no tuned axes" in err, err
    two = spec_text(grid_extra="\n  train.batch_size: [8, 16]")
    code, _, err = run(["next", write(tmp_path, two, "two.yaml"), "--root", tmp_path], capsys)
    assert code == 2 and err.count("\n") == 1 and "one cell per model size" in err, err


def test_multiplier_target_inverts_the_sweeps_own_data_law(tmp_path, capsys):
    """--target multiplier: the data law L(U) of the standard recipe is the report's, fitted
    on the sweep's own data block (analysis.recipes.infinite_compute), and the line gives the
    regularized E's multiplier with its interval, or the report's reason for none, in one
    line (7 sizes: on 5 the report does not identify the regularized E here); proposals are
    written as for E."""
    from adaptive_train import DATA_BLOCK

    root = tmp_path / "root"
    part = write(tmp_path, spec_text(presets=PRESETS[:7]) + DATA_BLOCK, "part.yaml")
    code, out, err = run(["sweep", part, "--root", root, "--executor", "debug",
                          "--train-target", TARGET], capsys)
    assert code == 0 and "136 launched" in out, out + err
    spec = write(tmp_path, spec_text() + DATA_BLOCK)
    block = tmp_path / "next.yaml"
    code, out, err = run(["next", spec, "--target", "multiplier", "-n", 4, "-o", block,
                          "--root", root], capsys)
    assert code == 0, err
    from analysis.recipes.infinite_compute import analyze
    from scalelab.cli.runs_table import read_runs_table

    report = analyze(read_runs_table(root / "nx")).multipliers
    row = report.filter(pl.col("recipe") == "regularized asymptote").row(0, named=True)
    if row["why"]:  # the report refuses it (here: its bootstrap CI is not finite): so does next
        assert f"regularized.multiplier: none ({row['why']})" in out, out
    else:
        assert f"regularized.multiplier = {row['data_multiplier']:.3g}x, 95% CI (" in out, out
    proposed = len(load_plan(block).table)  # 7 sizes done: the 8th's settle runs lead (3 here)
    assert 0 < proposed <= 4 and f"wrote {block}: {proposed} run(s)" in out


def test_a_grid_at_the_reference_weight_decay_only_is_the_standard_recipe(tmp_path, capsys):
    """Weight decay 0.1 alone: every cell is Kim's standard recipe, so next must not call it
    "regularized" (the demo's tuned block once read as regularized E = 2.22 while the
    report's regularized E was 1.99); standard.E is its target."""
    only = spec_text().replace("  optim.weight_decay: [0.1, 0.3, 1]\n", "  optim.weight_decay: [0.1]\n")
    spec = write(tmp_path, only, "standard_only.yaml")
    code, out, err = run(["next", spec, "--root", tmp_path], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "every cell is Kim's standard recipe, not regularized" in err, err
    code, out, err = run(["next", spec, "--target", "standard.E", "--root", tmp_path], capsys)
    assert code == 0, err


def test_a_table_of_runs_is_refused_in_one_line(tmp_path, capsys):
    """``next`` plans runs of a sweep: a table of runs from another trainer has no candidates
    (before: 'a sweep spec is a mapping with keys ...', as if the CSV were a broken spec)."""
    table = tmp_path / "runs.csv"
    table.write_text("N,D,loss\n1e6,1e8,3.2\n")
    code, out, err = run(["next", table], capsys)
    assert code == 2 and "a table of runs" in err and str(table) in err and "sweep spec is a mapping" not in err
    assert len([ln for ln in (out + err).splitlines() if ln.strip()]) == 1
