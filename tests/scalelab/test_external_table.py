"""Bring your own runs: ``fit``, ``report``, ``compare`` and ``transfer`` on a CSV or parquet
table of runs from outside scalelab (``analysis.tables.external``), checked against the
truth the table was drawn from, and bad tables refused in one line naming the file and
the column (exit 2).

The synthetic study: two recipes with L(N) = A/(N/1e6)^B + E at their optimal lr
(adamw: E 2.25, muon: E 1.95, so E_muon - E_adamw = -0.30), 7 sizes, 5 lr values per size
at 1/4..4x the optimum lr* = 0.02 (N/1e4)^-0.5 (a quadratic in log lr, 0.05 ln(m)^2 above
the law), 3 replicate seeds each, noise sd 0.005.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from _cli_exit import run_cli as run

from analysis.tables.external import read_external, to_runs_table

SIZES = (5.6e3, 1e4, 1.5e4, 2.6e4, 4.1e4, 8e4, 1.32e5)
LAWS = {"adamw": (0.06, 0.40, 2.25), "muon": (0.05, 0.45, 1.95)}
"""Recipe -> (A, B, E) of L = A/(N/1e6)^B + E."""
LR_C, LR_A = 0.02 * 1e4 ** 0.5, -0.5
"""lr* = LR_C * N^LR_A = 0.02 (N/1e4)^-0.5."""
MULTS = (0.25, 0.5, 1.0, 2.0, 4.0)
D = 655_360


def study(seed: int = 0, noise: float = 0.005) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for recipe, (A, B, E) in LAWS.items():
        for n in SIZES:
            law = A / (n / 1e6) ** B + E
            for m in MULTS:
                for s in range(3):
                    rows.append({"N": n, "D": D, "recipe": recipe, "seed": s, "lr": LR_C * n ** LR_A * m,
                                 "lr_mult": m,
                                 "loss": law + 0.05 * math.log(m) ** 2 + noise * rng.standard_normal()})
    return pl.DataFrame(rows)


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich tables on one line each


@pytest.fixture
def csv(tmp_path) -> Path:
    path = tmp_path / "wandb_export.csv"
    study().write_csv(path)
    return path


def _num(pattern: str, text: str) -> tuple[float, ...]:
    found = re.search(pattern, text)
    assert found, f"no match for {pattern!r} in:\n{text}"
    return tuple(float(g) for g in found.groups())


# -- the mapping ---------------------------------------------------------------------------


def test_table_maps_to_the_runs_table_shape():
    frame = study().head(6).with_columns(pl.Series("State", ["finished"] * 5 + ["crashed"]))
    runs = to_runs_table(frame, "t.csv").runs
    assert runs.columns[:10] == ["run_id", "name", "state", "N", "D_total", "D_unique", "epochs",
                                 "flops", "final_loss", "best_loss"]
    assert runs["state"].to_list() == ["COMPLETED"] * 5 + ["CRASHED"]
    assert runs["flops"].to_list() == pytest.approx((6 * runs["N"] * runs["D_total"]).to_list())
    assert runs["D_unique"].to_list() == runs["D_total"].to_list()  # U defaults to D
    assert runs["epochs"].to_list() == [1.0] * 6
    assert {"lr", "config.lr", "lr_mult", "config.lr_mult", "recipe", "seed"} <= set(runs.columns)
    assert "config.seed" not in runs.columns and "config.recipe" not in runs.columns


def test_loss_aliases_and_internal_names_are_read():
    frame = study().head(4).rename({"loss": "val/loss", "D": "D_total"}).with_columns(U=pl.lit(D / 2), C=pl.lit(1e12))
    runs = to_runs_table(frame).runs
    assert runs["final_loss"].to_list() == frame["val/loss"].to_list()
    assert runs["epochs"].to_list() == [2.0] * 4 and runs["flops"].to_list() == [1e12] * 4
    named = to_runs_table(frame.with_columns(best=pl.col("val/loss") - 1), loss_column="best").runs
    assert named["final_loss"].to_list() == (frame["val/loss"] - 1).to_list()


def test_nan_loss_rows_are_dropped_with_a_note(tmp_path):
    frame = study().with_columns(loss=pl.when(pl.int_range(pl.len()) < 3).then(None)
                                 .otherwise(pl.col("loss")))
    path = tmp_path / "t.csv"
    frame.write_csv(path)
    table = read_external(path)
    assert table.runs.height == frame.height - 3
    assert any("dropped 3 row(s)" in n for n in table.notes)


# -- the four commands on a CSV, against the truth -----------------------------------------


def test_fit_on_a_csv_recovers_the_law(csv, capsys):
    code, out, err = run(["fit", csv, "--where", "recipe=muon", "--where", "lr_mult=1",
                          "--bootstrap", "50", "-q"], capsys)
    assert code == 0, err
    (E,) = _num(r"│\s*E\s*│\s*([\d.]+)", out)
    (alpha,) = _num(r"│\s*alpha\s*│\s*([\d.]+)", out)
    assert abs(E - 1.95) < 0.03 and abs(alpha - 0.45) < 0.05, out  # truth 1.95, 0.45
    assert (csv.parent / "wandb_export_fit" / "powerlaw.png").is_file()


def test_report_on_a_csv_writes_beside_it(csv, capsys):
    code, out, err = run(["report", csv, "--bootstrap", "50", "-q"], capsys)
    assert code == 0, err
    folder = csv.parent / "wandb_export_report"
    assert (folder / "infinite_compute.md").is_file() and (folder / "report.md").is_file()
    assert "recipes from the runs' `recipe` column" in out
    for recipe, (_, _, truth) in LAWS.items():
        E, lo, hi = _num(rf"{recipe} vs N: L = .*?asymptote ([\d.]+), 95% CI \[([\d.]+), ([\d.]+)\]", out)
        assert lo <= truth <= hi and abs(E - truth) < 0.03, out


def test_report_without_recipes_says_what_the_best_cell_is_chosen_over(tmp_path, capsys):
    """A table whose optimizers are only a column (no recipe, no --recipe): the law in N takes
    each size's best cell over the optimizer too, and the report says so in one line."""
    path = tmp_path / "runs.csv"
    table = study(0)
    table.drop("recipe").with_columns(table["recipe"].alias("optimizer")).write_csv(path)
    code, out, err = run(["report", path, "--bootstrap", "0"], capsys)
    assert code == 0, err
    note = ("no recipes: each point's best cell is chosen over lr, lr_mult, optimizer (7 of 7 (N, D, U) "
            "points hold runs that differ in them)")
    assert note in " ".join(out.split()), out
    md = (tmp_path / "runs_report" / "report.md").read_text()
    assert "Note (every law of this report): each point's best cell is chosen over lr, lr_mult, optimizer" in md
    code, out, err = run(["report", path, "--bootstrap", "0", "--recipe", "muon=optimizer=muon",
                          "--recipe", "adamw=optimizer=adamw"], capsys)
    assert code == 0 and "best cell is chosen over" not in out, err + out


def test_two_objectives_get_a_law_each(tmp_path, capsys):
    """AR and masked-diffusion runs in one table, no recipes named: before, each size's best
    cell was the AR run (the MDM ELBO is higher) and the MDM runs were in no law. Truth here:
    AR E 1.95, MDM E 2.25 (the study's two laws, relabelled)."""
    path = tmp_path / "objectives.csv"
    table = study(0)
    obj = pl.when(table["recipe"] == "muon").then(pl.lit("ar")).otherwise(pl.lit("mdm"))
    table.with_columns(obj.alias("model.objective")).drop("recipe").write_csv(path)
    code, out, err = run(["report", path, "--bootstrap", "0"], capsys)
    assert code == 0, err
    assert "recipes from the runs' objectives (model.objective): ar (7 sizes), mdm (7 sizes)" in out, out
    for name, truth in (("ar", 1.95), ("mdm", 2.25)):
        E, lo, hi = _num(rf"{name} vs N: L = .*?asymptote ([\d.]+), 95% CI \[([\d.]+), ([\d.]+)\]", out)
        assert lo <= truth <= hi and abs(E - truth) < 0.03, out
    code, out, err = run(["compare", path, "--n-boot", "50"], capsys)
    assert code == 0 and "ar vs mdm" in out and "ar beats mdm" in out, err + out


def test_compare_on_a_csv_names_the_winner(csv, capsys):
    code, out, err = run(["compare", csv, "muon", "adamw", "--n-boot", "200"], capsys)
    assert code == 0, err
    assert "muon beats adamw" in out, out
    d, lo, hi = _num(r"E_muon - E_adamw = ([-\d.]+), paired CI \(([-\d.]+), ([-\d.]+)\)", out)
    assert lo <= -0.30 <= hi and abs(d + 0.30) < 0.04, out  # truth -0.30
    E, lo, hi = _num(r"E\(muon\) = ([\d.]+), 95% CI \(([\d.]+), ([\d.]+)\)", out)
    assert lo <= 1.95 <= hi, out


def test_compare_without_names_takes_the_two_recipes(csv, capsys):
    """Two recipes in the table (or two --recipe filters): RECIPE_A and RECIPE_B may be left
    out; anything else is one line naming what was found."""
    code, out, err = run(["compare", csv, "--n-boot", "50"], capsys)
    assert code == 0, err
    assert "adamw vs muon" in out and "muon beats adamw" in out, out  # the column's order
    code, out, err = run(["compare", csv, "--n-boot", "50", "--recipe", "m=recipe=muon",
                          "--recipe", "a=recipe=adamw"], capsys)
    assert code == 0 and "m vs a" in out and "m beats a" in out, err + out
    code, _, err = run(["compare", csv, "--recipe", "m=recipe=muon"], capsys)
    assert code == 2 and "name the two recipes to compare" in err and "found 1 (m; --recipe filters)" in err
    code, _, err = run(["compare", csv, "muon"], capsys)
    assert code == 2 and "name RECIPE_B too" in err


def test_transfer_on_a_csv_recovers_the_lr_law(csv, capsys):
    code, out, err = run(["transfer", csv, "--hp", "lr", "--where", "recipe=muon",
                          "--holdout-largest", "1"], capsys)
    assert code == 0, err
    a, lo, hi = _num(r"law: .*\n  c = [\d.]+, 95% CI .*\n  a_N = ([-\d.]+), 95% CI \(([-\d.]+), ([-\d.]+)\)", out)
    assert lo <= LR_A <= hi and abs(a - LR_A) < 0.03, out  # truth -0.5
    c, lo, hi = _num(r"law: .*\n  c = ([\d.]+), 95% CI \(([\d.]+), ([\d.]+)\)", out)
    assert lo <= LR_C <= hi, out  # truth 2.0
    assert "held out N=132,000" in out and ": covered" in out
    assert "norm check: skipped (a table of runs has no norms.parquet records)" in out
    assert (csv.parent / "wandb_export_fit" / "transfer-lr.png").is_file()


def test_parquet_with_other_names(tmp_path, capsys):
    """A parquet table with the aliases final_loss, D_total and a dotted hp (optim.lr)."""
    path = tmp_path / "runs.parquet"
    study(seed=1).rename({"loss": "final_loss", "D": "D_total", "lr": "optim.lr"}).write_parquet(path)
    code, out, err = run(["compare", path, "muon", "adamw", "--n-boot", "100"], capsys)
    assert code == 0 and "muon beats adamw" in out, err + out
    code, out, err = run(["transfer", path, "--hp", "optim.lr", "--where", "recipe=adamw"], capsys)
    assert code == 0, err
    a, lo, hi = _num(r"a_N = ([-\d.]+), 95% CI \(([-\d.]+), ([-\d.]+)\)", out)
    assert lo <= LR_A <= hi, out
    code, out, err = run(["fit", path, "--where", "recipe=adamw", "--where", "lr_mult=1",
                          "--bootstrap", "0", "-q"], capsys)
    assert code == 0, err
    (E,) = _num(r"│\s*E\s*│\s*([\d.]+)", out)
    assert abs(E - 2.25) < 0.04, out
    code, out, err = run(["report", path, "--bootstrap", "0", "-q"], capsys)
    assert code == 0 and (tmp_path / "runs_report" / "report.md").is_file(), err


# -- bad tables: one line naming the file and the column, exit 2 ---------------------------


def _write(path: Path, frame: pl.DataFrame) -> Path:
    frame.write_parquet(path) if path.suffix == ".parquet" else frame.write_csv(path)
    return path


def _bad_cases(tmp: Path) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """Case -> (the table, words its error line must hold)."""
    s = study().head(30)
    fifo = tmp / "fifo.csv"
    os.mkfifo(fifo)
    (tmp / "dir.csv").mkdir()
    good_parquet = _write(tmp / "good.parquet", s).read_bytes()
    (tmp / "truncated.parquet").write_bytes(good_parquet[: len(good_parquet) // 2])
    (tmp / "garbage.parquet").write_bytes(os.urandom(300))
    (tmp / "garbage.csv").write_bytes(b"\x00\xff\xfe" + os.urandom(300))
    (tmp / "empty_file.csv").write_bytes(b"")
    return {
        "missing N": (_write(tmp / "no_n.csv", s.rename({"N": "n"})), ("'N'", "did you mean 'n'")),
        "missing loss": (_write(tmp / "no_loss.csv", s.rename({"loss": "los"})), ("'loss'", "did you mean 'los'")),
        "another trainer's N": (_write(tmp / "params.csv", s.rename({"N": "n_params"})),
                                ("'N'", "is 'n_params' it? rename it to 'N'")),
        "another trainer's D": (_write(tmp / "tokens.csv", s.rename({"D": "Tokens"})),
                                ("'D'", "is 'Tokens' it? rename it to 'D'")),
        "text N": (_write(tmp / "text_n.csv", s.with_columns(N=pl.lit("125M"))), ("'N'", "'125M'", "not numbers")),
        "zero N": (_write(tmp / "zero_n.csv", s.with_columns(N=pl.lit(0))), ("'N'", "row 1")),
        "negative D": (_write(tmp / "neg_d.parquet", s.with_columns(D=pl.lit(-5))), ("'D'", "> 0")),
        "all loss NaN": (_write(tmp / "nan.csv", s.with_columns(loss=pl.lit(float("nan")))), ("'loss'", "finite")),
        "two losses": (_write(tmp / "two.csv", s.with_columns(val_loss=pl.col("loss"))), ("loss, val_loss",)),
        "header only": (_write(tmp / "header.csv", s.clear()), ("no rows",)),
        "empty file": (tmp / "empty_file.csv", ("empty",)),
        "truncated parquet": (tmp / "truncated.parquet", ("truncated",)),
        "garbage parquet": (tmp / "garbage.parquet", ("parquet",)),
        "garbage csv": (tmp / "garbage.csv", ()),
        "fifo": (fifo, ("FIFO",)),
        "directory": (tmp / "dir.csv", ("directory",)),
        "missing file": (tmp / "nowhere.csv", ("No such file",)),
    }


COMMANDS = {
    "fit": ["--bootstrap", "0", "-q"],
    "report": ["--bootstrap", "0", "-q"],
    "compare": ["muon", "adamw", "--n-boot", "20"],
    "transfer": ["--hp", "lr"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_tables_are_one_line_naming_file_and_column(tmp_path, capsys, command):
    failures = []
    for case, (path, words) in _bad_cases(tmp_path).items():
        extra = COMMANDS[command]
        argv = [command, path, *extra] if command != "compare" else [command, path, *extra]
        code, out, err = run(argv, capsys)
        line = err.strip()
        ok = (code == 2 and "\n" not in line and str(path) in line
              and all(w in line for w in words) and "Traceback" not in err)
        if not ok:
            failures.append(f"{case}: exit {code}: {err[-600:]}")
    assert not failures, "\n".join(failures)


def test_table_specific_option_errors(csv, capsys):
    code, _, err = run(["transfer", csv, "--hp", "lrr"], capsys)
    assert code == 2 and "lrr" in err and "did you mean 'lr'" in err and str(csv) in err
    code, _, err = run(["fit", csv, "--x", "K", "--bootstrap", "0"], capsys)
    assert code == 2 and "--x" in err and "evals.parquet" in err
    code, _, err = run(["compare", csv, "muon", "sgd", "--n-boot", "20"], capsys)
    assert code == 2 and "sgd" in err
    code, _, err = run(["fit", csv, "--loss-column", "nope", "--bootstrap", "0"], capsys)
    assert code == 2 and "'nope'" in err and str(csv) in err
    code, _, err = run(["transfer", csv, "--hp", "lr", "--norm", "rms_to_inf", "--where", "recipe=muon"], capsys)
    assert code == 2 and "--norm" in err and "norms" in err
