"""``scalelab fit --where/--group-by/--x`` on a small REAL sweep (debug backend, real training).

One module-scoped sweep: block ``sizes`` (5 model sizes x 2 recipes, recipe zipped with
weight decay), block ``data`` (cpu-50k at 4 unique-token budgets U) and block ``ensemble``
(4 members of cpu-50k), each run 16-256 steps of the real train loop; then
``scalelab collect`` and ``scalelab ensemble``. Assertions are on counts and on what the
CLI prints, never on timings.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from _waits import CEILING_S
from rich.console import Console

from analysis.fit.diagnostics import at_bounds
from analysis.fit.fit import fit_law
from analysis.fit.grouped import GroupFit, Selection, fit_selection
from analysis.laws.laws import PowerLaw
from scalelab.cli import main
from scalelab.cli.fit_table import fit_table

pytestmark = pytest.mark.filterwarnings("ignore::analysis.errors.IdentifiabilityWarning")
"""Small real sweeps are weakly identified; the CLI prints those warnings, tests check them."""

SIZES = ["cpu-50k", "cpu-100k", "cpu-250k", "cpu-500k", "cpu-1m"]
BUDGETS = [1024, 4096, 8192, 16384]
SPEC = {
    "name": "fitsel",
    "base": {
        "model": {"preset": "cpu-50k"},
        "data": {"seq_len": 16, "unique_tokens": 2048, "vocab_size": 256, "val_tokens": 4096},
        "optim": {"weight_decay": 0.1},
        "train": {"batch_size": 4, "eval_every": 16, "eval_batches": 2,
                  "checkpoint_every": 100000, "norms_every": 0, "log_every": 8, "device": "cpu"},
    },
    "launcher": {"executor": "debug", "max_parallel": 1},
    "blocks": [
        {"name": "sizes", "grid": {"model.preset": SIZES},
         "zip": [{"extra.recipe": ["standard", "regularized"], "optim.weight_decay": [0.1, 1.0]}]},
        {"name": "data", "grid": {"data.unique_tokens": BUDGETS}},
        {"name": "ensemble", "members": 4},
    ],
}  # fmt: skip
N_RUNS = len(SIZES) * 2 + len(BUDGETS) + 4


def cli(*args: str) -> int:
    try:
        main([str(a) for a in args])
    except SystemExit as done:
        return int(done.code or 0)
    return 0


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fitsel")
    spec = root / "fitsel.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    assert cli("sweep", spec, "--root", root / "runs", "--executor", "debug") == 0
    sweep_dir = root / "runs" / "fitsel"
    assert cli("collect", sweep_dir) == 0
    assert cli("ensemble", sweep_dir, "--device", "cpu") == 0
    return sweep_dir


@pytest.fixture()
def wide(monkeypatch):
    """Rich tables wide enough that no cell wraps (rich reads COLUMNS)."""
    monkeypatch.setenv("COLUMNS", "250")


def fit(capsys, *args: str) -> tuple[int, str, str]:
    code = cli("fit", *args)
    out, err = capsys.readouterr()
    return code, out, err


def runs(sweep: Path) -> pl.DataFrame:
    return pl.read_parquet(sweep / "runs.parquet")


def test_the_sweep_is_real_and_complete(sweep):
    table = runs(sweep)
    assert table.height == N_RUNS and set(table["state"]) == {"COMPLETED"}
    assert table["final_loss"].null_count() == 0 and table["steps_done"].min() >= 16


def test_where_selects_the_right_runs(sweep, wide, capsys):
    from analysis.tables.select import select_runs

    table = runs(sweep)
    assert select_runs(table, ["block=sizes"]).height == 10
    assert select_runs(table, ["block=sizes", "recipe=standard"]).height == 5
    assert select_runs(table, ["optim.weight_decay!=0.1"]).height == 5
    # 4 in 'sizes', and every run of 'data' (4) and 'ensemble' (4): they inherit cpu-50k from
    # the base, and the plan carries each run's own value in the axis column, not null
    assert select_runs(table, ['pl.col("model.preset").is_in(["cpu-50k", "cpu-1m"])']).height == 12
    assert select_runs(table, ["block=sizes", 'pl.col("model.preset").is_in(["cpu-50k", "cpu-1m"])']).height == 4
    assert select_runs(table, ["block=ensemble", "member>0"]).height == 3
    code, out, _ = fit(capsys, sweep, "--where", "block=sizes", "--where", "recipe=standard",
                       "--bootstrap", "20")
    assert code == 0
    assert "5 runs, R^2" in out and "where block=sizes AND recipe=standard" in out
    code, out, _ = fit(capsys, sweep, "--where", 'pl.col("block") == "sizes"', "--bootstrap", "0")
    assert code == 0 and "10 runs, R^2" in out
    code, out, _ = fit(capsys, sweep, "--bootstrap", "0")  # no --where: every completed run
    assert code == 0 and f"{N_RUNS} runs, R^2" in out


def test_group_by_fits_each_group_in_one_table(sweep, wide, capsys):
    code, out, _ = fit(capsys, sweep, "--where", "block=sizes", "--group-by", "recipe",
                       "--bootstrap", "20")
    assert code == 0
    assert out.count("┏") == 1  # one table
    assert re.search(r"recipe=regularized", out) and re.search(r"recipe=standard", out)
    assert out.count("5 runs, R^2") == 2 and out.count("95% CI") == 1
    for recipe in ("regularized", "standard"):
        assert (sweep / "fit" / f"powerlaw-recipe={recipe}.png").is_file()
    sel = fit_selection(runs(sweep), where=["block=sizes"], by=["recipe", "block"])
    assert [g.label for g in sel.groups] == ["recipe=regularized, block=sizes",
                                             "recipe=standard, block=sizes"]
    assert all(g.data["recipe"].n_unique() == 1 and g.data.height == 5 for g in sel.groups)


def test_x_switches_the_input(sweep, wide, capsys):
    table = runs(sweep)
    sel = fit_selection(table, x="U", where=["block=data"])
    (g,) = sel.groups
    assert g.result.law == PowerLaw(x="U") and sorted(g.data["U"].to_list()) == BUDGETS
    sel_c = fit_selection(table, x="C", where=["block=sizes", "recipe=standard"])
    assert sel_c.groups[0].result.law.columns == ("C",)
    assert sel_c.groups[0].data["C"].to_list() == sel_c.groups[0].data["flops"].to_list()
    code, out, _ = fit(capsys, sweep, "--x", "U", "--where", "block=data", "--bootstrap", "0")
    assert code == 0 and "x = U: unique tokens" in out and "4 runs, R^2" in out
    assert (sweep / "fit" / "powerlaw_U.png").is_file()
    code, out, _ = fit(capsys, sweep, "--x", "D", "--where", "block=data", "--bootstrap", "0")
    assert code == 0 and "x = D: total training tokens" in out
    code, out, _ = fit(capsys, sweep, "--x", "K", "--bootstrap", "20")
    assert code == 0 and "x = K: ensemble members" in out and "4 points, R^2" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--where", "block=sizes", "--where", "recipe=standard", "--where", "N<3e5"],
         "3 runs after --where for 3 free parameters of powerlaw: need >= 4"),
        (["--where", "block=sizes", "--group-by", "model.preset"],
         "2 runs after --where in group model.preset=cpu-100k for 3 free parameters of powerlaw"),
        (["--x", "K", "--where", "K<4"], "3 points after --where for 3 free parameters"),
        (["--where", "block=nothing"], "0 runs after --where"),
        (["--law", "chinchilla", "--where", "block=data"],
         "4 runs after --where for 5 free parameters of chinchilla: need >= 6"),
        (["--where", "recpie=standard"], "unknown column 'recpie' (did you mean 'recipe'?)"),
        (["--where", "__import__('os').system('echo pwned')"], "calling name '__import__' is not allowed"),
        (["--group-by", "recipes"], "unknown column 'recipes' (did you mean 'recipe'?)"),
        (["--law", "chinchilla", "--x", "D"], "--x applies to powerlaw only"),
        (["--x", "Q"], "--x must be one of"),
        # The 4 ensemble members share one N: a power law in N is refused.
        (["--where", "block=ensemble"], "all N are equal (51936 at 4 points)"),
    ],
)
def test_bad_selection_exits_2_with_one_line_in_process(sweep, capsys, argv, message):
    code, out, err = fit(capsys, sweep, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert out == ""  # refused before anything ran or printed


def test_underdetermined_fit_is_refused_through_the_real_cli(sweep):
    done = subprocess.run(
        [sys.executable, "-m", "scalelab", "fit", str(sweep), "--where", "block=sizes",
         "--where", "recipe=standard", "--where", 'pl.col("N") < 3e5'],
        capture_output=True, text=True, timeout=CEILING_S, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].endswith("3 runs after --where for 3 free parameters of powerlaw: need >= 4")
    assert done.stdout == ""


def _value_cells(text: str, param: str) -> list[str]:
    """The value column of each table row for ``param``."""
    cells = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("│")]
        if len(parts) > 4 and parts[2] == param:
            cells.append(parts[3])
    return cells


def test_a_parameter_at_its_bound_is_never_a_bare_number(sweep):
    sel = fit_selection(runs(sweep), where=["block=sizes", "recipe=standard"])
    data = sel.groups[0].data
    capped = fit_law(PowerLaw(), data, bounds={"alpha": (None, 0.05)}, warn=False)
    hits = at_bounds(capped)
    assert hits["alpha"] == ("upper", pytest.approx(0.05))  # real losses fall faster
    group = GroupFit({}, data, capped, capped.bootstrap(20, seed=0), hits)
    console = Console(record=True, width=250)
    console.print(fit_table(Selection("powerlaw", "N", (), data.height, (group,))))
    text = console.export_text()
    assert _value_cells(text, "alpha") == ["not identified (at upper bound 0.05)"]
    for p, (side, _) in hits.items():  # E may follow alpha to its own bound
        (cell,) = _value_cells(text, p)
        assert cell.startswith(f"not identified (at {side} bound")
    assert f"not identified ({', '.join(hits)} at bound)" in text
    assert not re.search(r"│\s*0\.05\s*│", text)


def test_cli_marks_every_parameter_at_a_bound(sweep, wide, capsys):
    for argv in (["--x", "K"], ["--where", "block=sizes"]):
        code, out, _ = fit(capsys, sweep, *argv, "--bootstrap", "20")
        assert code == 0
        sel = fit_selection(
            pl.read_parquet(sweep / "ensembles" / "evals.parquet") if "K" in argv else runs(sweep),
            x="K" if "K" in argv else None,
            where=[a for a in argv[1:] if "=" in a],
        )
        (g,) = sel.groups
        for p, (side, _) in g.at_bounds.items():
            (cell,) = _value_cells(out, p)
            assert cell.startswith(f"not identified (at {side} bound"), out
        for p in set(g.result.params) - set(g.at_bounds):
            (cell,) = _value_cells(out, p)
            assert not cell.startswith("not identified")
