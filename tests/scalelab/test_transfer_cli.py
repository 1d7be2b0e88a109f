"""``scalelab transfer`` on a fake sweep directory (runs.parquet and per-run norms.parquet
from analysis.synthetic.transfer; nothing is trained), in-process."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
from _cli_exit import exit_code

from analysis.synthetic.transfer import (
    JointTruth,
    TransferTruth,
    synthetic_joint_sweep,
    synthetic_sweep,
)
from analysis.tables.layout import NORMS_FILE, RUNS_FILE, RUNS_FOLDER

SIZES = np.geomspace(5e3, 3e5, 6)


def _sweep(tmp_path, hp="optim.lr", truth=TransferTruth(), joint=False):  # noqa: B008 (a frozen dataclass)
    if joint:
        runs, norms = synthetic_joint_sweep(JointTruth(), SIZES, lr_points=5, rng=1), None
    else:
        runs, norms = synthetic_sweep(truth, SIZES, hp=hp, rng=1)
    sweep = tmp_path / "sweep"
    for rid in runs["run_id"]:
        d = sweep / RUNS_FOLDER / f"run-{rid}"
        d.mkdir(parents=True)
        if norms is not None:
            norms.filter(pl.col("run_id") == rid).write_parquet(d / NORMS_FILE)
    runs = runs.with_columns(pl.format("{}/run-{}", pl.lit(RUNS_FOLDER), pl.col("run_id")).alias("run_dir"))
    runs.write_parquet(sweep / RUNS_FILE)
    later = (sweep / RUNS_FILE).stat().st_mtime + 60  # fresh: no collect
    os.utime(sweep / RUNS_FILE, (later, later))
    return sweep


def test_transfer_prints_table_law_holdout_norms_and_a_rule_the_spec_accepts(tmp_path, capsys):
    sweep = _sweep(tmp_path)
    assert exit_code(["transfer", sweep, "--hp", "optim.lr", "--holdout-largest", "1",
                      "--out", tmp_path / "fig"]) == 0
    out = capsys.readouterr().out
    assert "per-group optimum of optim.lr" in out and "a_N = -0.34" in out
    assert "held out N=300,000: predicted optim.lr*" in out and ": covered" in out
    assert "constant across sizes" in out and "from the norm" in out
    assert (tmp_path / "fig.png").is_file()
    rule = next(line for line in out.splitlines() if line.startswith("  optim.lr: "))
    from scalelab.sweep.spec.load import parse_spec

    parse_spec("name: t\nbase: {model: {preset: twin-41k}}\nderive:\n" + rule + "\n")  # raises if refused
    text = rule.split('"')[1]
    c, a = float(text.split(" * ")[0]), float(text.split("** (")[1].rstrip(")"))
    assert abs(c * 1e5 ** a / TransferTruth().hp_star(np.array([[1e5]]))[0] - 1) < 0.05


def test_weight_decay_too(tmp_path, capsys):
    sweep = _sweep(tmp_path, "optim.weight_decay", TransferTruth(c=0.01, a=(0.4,)))
    assert exit_code(["transfer", sweep, "--hp", "optim.weight_decay", "--out", tmp_path / "f"]) == 0
    assert 'optim.weight_decay: "' in capsys.readouterr().out


def test_bad_hp_and_x_exit_2_in_one_line(tmp_path, capsys):
    sweep = _sweep(tmp_path)
    assert exit_code(["transfer", sweep, "--hp", "optim.lrr"]) == 2
    err = capsys.readouterr().err
    assert "--hp optim.lrr: no such column (did you mean 'optim.lr'?)" in err
    assert len(err.strip().splitlines()) == 1
    # Any subset of N, D, U, C is a law (issue 35: batch-size laws in D alone are published).
    assert exit_code(["transfer", sweep, "--hp", "optim.lr", "--x", "Q"]) == 2
    err = capsys.readouterr().err
    assert "--x: expected N, D, U or C" in err and "'Q' is not a variable" in err
    assert len(err.strip().splitlines()) == 1


def test_x_choices_match_the_analysis():
    from analysis.transfer.transfer import X_CHOICES
    from scalelab.cli.transfer import X_CHOICES as CLI

    assert tuple(",".join(c) for c in X_CHOICES) == CLI


def test_batch_size_law_profiled_over_the_lr(tmp_path, capsys):
    sweep = _sweep(tmp_path, joint=True)
    assert exit_code(["transfer", sweep, "--hp", "train.batch_size", "--best-over", "optim.lr",
                      "--holdout-largest", "1", "--out", tmp_path / "fig"]) == 0
    out = capsys.readouterr().out
    assert "42 cells, each one's loss profiled over optim.lr (210 values tried in all), in 6 groups" in out
    law = next(line for line in out.splitlines() if line.startswith("  a_N = "))
    assert abs(float(law.split()[2].rstrip(",")) - JointTruth().a_b) < 0.02  # SE ~0.005
    assert "held out N=300,000" in out and 'train.batch_size: "' in out
    assert "no norms.parquet records" in out and (tmp_path / "fig.png").is_file()
    assert exit_code(["transfer", sweep, "--hp", "train.batch_size", "--best-over", "optim.lrr"]) == 2
    err = capsys.readouterr().err
    assert "--best-over optim.lrr: no such column (did you mean 'optim.lr'?)" in err
    assert len(err.strip().splitlines()) == 1
    assert exit_code(["transfer", sweep, "--hp", "train.batch_size", "--best-over", "N"]) == 2
    assert "the law's own hp or x" in capsys.readouterr().err
