"""The design check of ``scalelab sweep --dry-run`` (``scalelab.sweep.view.design_check``,
issue 34 item 5): before any run, each recipe or block whose law the planned runs cannot
identify, what to add and its cost."""

from __future__ import annotations

import re
import time
from pathlib import Path

import polars as pl
import pytest

from scalelab.cli import main
from scalelab.sweep.plan.expand import load_plan
from scalelab.sweep.view import design_check as dc

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
KIM_4 = "model.preset: ['150M', '300M', '600M', '1.4B']"
TWIN = """name: dc
base:
  model: {preset: twin-41k}
  data: {dataset: default, seq_len: 128, unique_tokens: 32768, epochs: 4}
  optim: {name: adamw, lr: 3.0e-3, weight_decay: 0.1}
  train: {batch_size: 16, device: cpu}
launcher: {executor: local}
blocks:
"""
SIZES = "[twin-5.6k, twin-10k, twin-15k, twin-26k, twin-41k]"


def _check(tmp_path: Path, text: str, name: str = "spec.yaml") -> tuple[list[dc.Finding], str]:
    path = tmp_path / name
    path.write_text(text)
    findings = dc.check_plan(load_plan(path))
    return findings, "\n".join(dc.lines(findings))


def _flat(text: str) -> str:
    """The check's text with its wrapping undone."""
    return re.sub(r"\s+", " ", text)


def _spec_200m(sizes: str) -> str:
    text = (SWEEPS / "200M_tokens.yaml").read_text()
    grid = "  model.preset: ['70M', '150M', '300M', '600M', '1.4B']\n  optim.lr"
    assert grid in text
    return text.replace(grid, f"  model.preset: {sizes}\n  optim.lr", 1)


def test_200M_tokens_plans_five_sizes_and_is_identified():
    plan = load_plan(SWEEPS / "200M_tokens.yaml")
    tuned = plan.table.filter(pl.col("block") == "tuned")
    assert tuned["N"].n_unique() == 5 and "70M" in tuned["model.preset"].to_list()
    findings = dc.check_plan(plan)
    assert all(f.level == dc.OK for f in findings), dc.lines(findings)
    sizes = next(f for f in findings if "standard" in f.subject)
    assert sizes.text == "5 sizes, E on 2 residual dof"


def test_four_sizes_say_one_residual_dof_and_what_a_fifth_buys(tmp_path):
    findings, text = _check(tmp_path, _spec_200m("['150M', '300M', '600M', '1.4B']"))
    flat = _flat(text)
    weak = [f for f in findings if f.level == dc.WEAK]
    assert [f.subject for f in weak] == ["recipes 'standard', 'regularized'"]
    assert "4 sizes (154M, 300M, 602M, 1.43B)" in flat
    assert "will rest on 1 residual degree of freedom" in flat
    assert "flagged 1-dof t interval (t_0.975 = 12.71)" in flat
    assert "A fifth size buys 2 residual dof (t 12.71 -> 4.30: an interval ~3x narrower" in flat
    # what it costs, from the plan's own GPU-hours: the 150M row of the grid scaled by N
    plan = load_plan(tmp_path / "spec.yaml")
    t = plan.table.filter(pl.col("block") == "tuned")
    t = t.filter(pl.col("N") == t["N"].min())
    ratio = (1.431e9 / 1.541e8) ** (1 / 3)
    hours = t["gpu_hours"].sum() / ratio
    got = re.search(r"below, N ~ (\S+) .*?\+336 runs, ~([\d,]+) GPU-hours", flat)
    assert got and got[1] == "73.3M"
    assert float(got[2].replace(",", "")) == pytest.approx(hours, rel=0.01)
    assert re.search(r"above, N ~ 3\.01B: \+336 runs, ~[\d,]+ GPU-hours", flat)
    assert max(map(len, text.splitlines())) <= 100


def test_three_sizes_are_not_identified(tmp_path):
    findings, text = _check(tmp_path, _spec_200m("['150M', '300M', '1.4B']"))
    bad = [f for f in findings if f.level == dc.NOT_IDENTIFIED]
    assert [f.subject for f in bad] == ["recipes 'standard', 'regularized'"]
    flat = _flat(text)
    assert "3 sizes (154M, 300M, 1.43B): E is not identified" in flat
    assert "add 2 sizes to block 'tuned'" in flat


def test_a_data_block_of_one_budget_cannot_fit_the_data_law(tmp_path):
    text = TWIN + f"""  - name: tuned
    grid:
      model.preset: {SIZES}
      optim.weight_decay: [0.1, 1.0]
  - name: data
    base: {{model: {{preset: twin-41k}}}}
    grid:
      data.unique_tokens: [65536]
      optim.lr: [3.0e-3]
"""
    findings, out = _check(tmp_path, text)
    data = next(f for f in findings if f.subject.startswith("block 'data'"))
    assert data.level == dc.NOT_IDENTIFIED
    flat = _flat(out)
    assert "2 distinct budgets U (32.8K, 65.5K; 1 budget of its own with the standard recipe's)" in flat
    assert "need >= 3 (4 to test the floor C); add U = 131K, 262K to block 'data'" in flat


def test_two_lr_values_per_size_cannot_give_a_transfer_optimum(tmp_path):
    text = TWIN + f"""  - name: lr
    base: {{extra: {{recipe: adamw}}}}
    grid:
      model.preset: {SIZES}
      optim.lr: [1.0e-3, 3.0e-3]
"""
    findings, out = _check(tmp_path, text)
    transfer = [f for f in findings if "transfer" in f.subject]
    assert [f.subject for f in transfer] == ["block 'lr' (optim.lr transfer)"]
    assert "2 value(s) of optim.lr at 5 size(s)" in _flat(out)
    assert "+5 runs" in _flat(out)  # one more lr per size


def test_a_zip_of_one_cell_per_size_is_not_a_transfer_sweep(tmp_path):
    findings, _ = _check(tmp_path, str((SWEEPS / "demo.yaml").read_text()))
    assert not [f for f in findings if "transfer" in f.subject]


def test_no_replicate_seeds_with_two_recipes(tmp_path):
    blocks = "".join(f"""  - name: {name}
    base: {{optim: {{name: {name}}}, extra: {{recipe: {name}}}}}
    grid:
      model.preset: {SIZES}
""" for name in ("adamw", "muon"))
    findings, out = _check(tmp_path, TWIN + blocks)
    sigma = next(f for f in findings if f.subject == "sigma")
    assert sigma.level == dc.WEAK and "no replicate seeds" in sigma.text
    assert "add a second seed of the cheapest cell at each size of recipe 'adamw'" in _flat(out)
    assert "+5 runs" in sigma.text
    seeded = blocks.replace("    base: {optim: {name: muon}", "    seeds: [0, 1]\n    base: {optim: {name: muon}")
    findings, _ = _check(tmp_path, TWIN + seeded, "seeded.yaml")
    assert next(f for f in findings if f.subject == "sigma").level == dc.OK


def test_demo_says_precisely_what_is_weak():
    findings = dc.check_plan(load_plan(SWEEPS / "demo.yaml"))
    by = {f.subject: f for f in findings}
    assert by["recipe 'regularized'"].level == dc.OK  # 7 sizes
    assert by["recipe 'standard'"].level == dc.WEAK  # its wd-0.1 cells sit at 4 sizes
    assert by["recipe 'standard'"].text.startswith("4 sizes (5.61K, 26.2K, 80.1K, 132K)")
    assert by["block 'ensemble' (ensemble)"].level == dc.NOT_IDENTIFIED  # members at one size
    assert by["sigma"].level == dc.OK


def test_dry_run_prints_the_check_and_a_launch_only_its_problems(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    path = tmp_path / "four.yaml"
    path.write_text(_spec_200m("['150M', '300M', '600M', '1.4B']"))
    with pytest.raises(SystemExit) as code:
        main(["sweep", str(path), "--dry-run", "--root", str(tmp_path)])
    assert code.value.code == 0
    out = _flat(capsys.readouterr().out)
    assert "design check (can the planned runs identify each law? advisory):" in out
    assert "1 residual degree of freedom" in out and "A fifth size buys" in out
    launch = dc.launch_lines(dc.check_plan(load_plan(path)))
    assert launch[0].startswith("design check") and "launching anyway" in launch[-1]
    assert not any(line.lstrip().startswith("ok ") for line in launch)


def test_a_check_that_fails_never_stops_the_dry_run(tmp_path, capsys, monkeypatch):
    def boom(plan):
        raise ValueError("no")

    monkeypatch.setattr(dc, "check_plan", boom)
    with pytest.raises(SystemExit) as code:
        main(["sweep", str(SWEEPS / "tiny.yaml"), "--dry-run", "--root", str(tmp_path)])
    assert code.value.code == 0
    assert "design check: skipped (ValueError: no)" in capsys.readouterr().out


def test_fast_on_a_large_plan():
    """Vectorised: a 2,000,000-run table (10 blocks x 5 sizes x 40,000 runs) in seconds."""
    n = 2_000_000
    i = pl.int_range(n).alias("i")
    table = pl.select(
        i.cast(pl.String).alias("run_id"),
        pl.format("b{}", i % 10).alias("block"),
        (10_000 * (2 ** (i // 10 % 5))).alias("N"),
        (1e-3 * (1 + i // 50 % 7)).alias("optim.lr"),
        (i % 3).alias("seed"),
        pl.lit(1_000_000, pl.Int64).alias("D_unique"),
    ).with_columns(pl.col("D_unique").alias("D_total"), (pl.col("N") * 6e6).cast(pl.Float64).alias("flops"),
                    pl.lit(None, pl.Float64).alias("gpu_hours"))
    start = time.perf_counter()
    findings = dc.check(table, ("optim.lr",))
    took = time.perf_counter() - start
    assert findings and took < 20, took


def test_a_launch_prints_the_problems_before_it_starts(tmp_path, capsys, monkeypatch):
    from scalelab.errors import UserError
    from scalelab.sweep.run import start

    def stop(*args, **kwargs):
        raise UserError("stopped before launching (test)")

    monkeypatch.setattr(start, "start_sweep", stop)
    path = tmp_path / "four.yaml"
    path.write_text(_spec_200m("['150M', '300M', '600M', '1.4B']"))
    with pytest.raises(SystemExit) as code:
        main(["sweep", str(path), "--root", str(tmp_path)])
    assert code.value.code == 2
    captured = capsys.readouterr()
    out = _flat(captured.out)
    assert "1 residual degree of freedom" in out and "launching anyway" in out
    assert "stopped before launching" in captured.err
