"""``scalelab fit SWEEP --isoflop --group-by KEY``: one fit per group in one table, a plot
per group, a one-line warning under 3 budgets; bad input one line, exit 2."""

import polars as pl
import pytest
from _cli_exit import exit_code as _cli

from analysis.synthetic.runs import synthetic_isoflop_runs

OFFSETS = (-0.3, 0.2, 0.0, 0.3, -0.15)


@pytest.fixture()
def grouped_sweep(tmp_path):
    d = tmp_path / "grouped"
    d.mkdir()
    a = synthetic_isoflop_runs(offset=OFFSETS, seed=1).with_columns(recipe=pl.lit("standard"))
    b = synthetic_isoflop_runs(offset=OFFSETS, seed=2).with_columns(recipe=pl.lit("wide"))
    two = synthetic_isoflop_runs(budgets=(1e18, 1e20), seed=3).with_columns(recipe=pl.lit("two"))
    pl.concat([a, b, two], how="diagonal_relaxed").write_parquet(d / "runs.parquet")
    return d



def test_group_by_gives_one_row_per_group_and_a_plot_each(grouped_sweep, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")
    code = _cli(["fit", str(grouped_sweep), "--isoflop", "--group-by", "recipe",
                 "--bootstrap", "50"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "isoFLOP fits by group" in out
    for g in ("recipe=standard", "recipe=wide", "recipe=two"):
        assert g in out
        assert (grouped_sweep / "fit" / f"isoflop-{g}.png").is_file()
    warn = [ln for ln in out.splitlines() if ln.startswith("warning [recipe=two]")]
    assert len(warn) == 1 and "only 2 budget(s) kept of 2" in warn[0]
    assert "a (95% CI)" in out and "5 of 5" in out


def test_ungrouped_fit_prints_the_warning_line(grouped_sweep, capsys):
    code = _cli(["fit", str(grouped_sweep), "--isoflop", "--where", "recipe=two",
                 "--bootstrap", "20"])  # fmt: skip
    out = capsys.readouterr().out
    warn = [ln for ln in out.splitlines() if ln.startswith("warning: only 2 budget(s)")]
    assert code == 0 and len(warn) == 1


@pytest.mark.parametrize("extra, message", [
    (["--group-by", "recipee"], "did you mean 'recipe'"),
    (["--group-by", "recipe", "--where", "flops<2e18"], "group recipe="),
])
def test_group_by_bad_input_exits_2_with_one_line(grouped_sweep, capsys, extra, message):
    assert _cli(["fit", str(grouped_sweep), "--isoflop", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_isoflop_defaults_are_the_analysis_defaults():
    """scalelab/cli/fit.py spells them without importing analysis at start-up."""
    from analysis.isoflop.estimate import METHODS
    from analysis.isoflop.window import DEFAULT_WINDOW
    from scalelab.cli.fit import ISOFLOP_METHODS, ISOFLOP_WINDOW

    assert ISOFLOP_WINDOW == DEFAULT_WINDOW and ISOFLOP_METHODS == METHODS


def test_window_and_method_reach_the_fit(grouped_sweep, capsys, monkeypatch):
    """--window 0 keeps every run, --isoflop-method interp: the printed exponent is the
    library's for the same options."""
    from analysis.isoflop.from_runs import isoflop_selection

    monkeypatch.setenv("COLUMNS", "220")
    table = pl.read_parquet(grouped_sweep / "runs.parquet")
    for extra, kw in ((["--window", "0"], {"window": None}),
                      (["--isoflop-method", "interp"], {"method": "interp"}),
                      (["--isoflop-line", "joint"], {"joint": True}),
                      ([], {})):
        code = _cli(["fit", str(grouped_sweep), "--isoflop", "--where", "recipe=standard",
                     "--bootstrap", "20", *extra])
        out = capsys.readouterr().out
        fit = isoflop_selection(table, where=["recipe=standard"], n_boot=20, **kw).fit
        assert code == 0 and f"N_opt ∝ C^a: a = {fit.a:.4f}" in out, (extra, out)
        assert ("note: the joint line" in out) == (kw == {"joint": True}), out
    joint = isoflop_selection(table, where=["recipe=standard"], n_boot=20, joint=True).fit
    two_stage = isoflop_selection(table, where=["recipe=standard"], n_boot=20).fit
    assert joint.a != two_stage.a  # the option reaches the fit: another estimator, another a


@pytest.mark.parametrize("extra, message", [
    (["--isoflop", "--window", "1"], "--window"),
    (["--isoflop", "--window", "nan"], "--window"),
    (["--isoflop", "--isoflop-method", "spline"], "expected one of parabola, interp"),
    (["--window", "4"], "applies to --isoflop fits only"),
    (["--isoflop-method", "interp"], "applies to --isoflop fits only"),
    (["--isoflop", "--isoflop-line", "jiont"], "did you mean 'joint'"),
    (["--isoflop", "--isoflop-line", "joint", "--isoflop-method", "interp"], "not interp"),
    (["--isoflop-line", "joint"], "applies to --isoflop fits only"),
])
def test_window_and_method_bad_input_exit_2_with_one_line(grouped_sweep, capsys, extra, message):
    assert _cli(["fit", str(grouped_sweep), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
