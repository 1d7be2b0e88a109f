"""Runs-table preparation, plots and the markdown report."""

import polars as pl
import pytest

from analysis import AnalysisInputError, fit_law, prepare_runs
from analysis.plots.plots import (
    plot_isoflop,
    plot_loss_vs_epochs,
    plot_loss_vs_x,
    plot_residuals,
    save_figure,
)
from analysis.report.report import write_report
from analysis.synthetic.runs import synthetic_runs


def test_prepare_runs_excludes_diverged_and_incomplete_with_notes():
    runs = synthetic_runs()
    runs = pl.concat([runs, runs.head(1).with_columns(pl.lit(None, pl.Utf8).alias("state"))])
    table = prepare_runs(runs)
    assert table.n_input == runs.height
    assert table.data.height == runs.height - 3
    assert set(table.data.columns) >= {"N", "D", "U", "loss", "run_id"}
    joined = " | ".join(table.notes)
    assert "1 run(s) in state DIVERGED: diverged" in joined
    assert "1 run(s) in state FAILED: incomplete" in joined
    assert "NOT_STARTED" in joined


def test_prepare_runs_plain_table_and_bad_values():
    plain = pl.DataFrame(
        {"N": [1e6, 2e6, 4e6], "D": [1e8] * 3, "U": [1e8] * 3, "loss": [4.0, float("nan"), 3.5]}
    )
    table = prepare_runs(plain)
    assert table.data.height == 2 and "non-finite" in table.notes[0]
    with pytest.raises(AnalysisInputError, match="no loss column 'best_loss'"):
        prepare_runs(
            plain.drop("loss").with_columns(pl.lit(1.0).alias("final_loss")), loss="best_loss"
        )


def test_plots_write_png_and_svg(tmp_path):
    data = prepare_runs(synthetic_runs()).data
    single = data.filter(pl.col("D") == pl.col("U"))
    fit = fit_law("chinchilla", single, warn=False)
    pl_fit = fit_law("powerlaw", data.filter(pl.col("D") == 1.6e9), warn=False)
    boot = pl_fit.bootstrap(20, seed=0, workers=1)
    figs = {
        "x": plot_loss_vs_x(data.filter(pl.col("D") == 1.6e9), pl_fit, boot),
        "xd": plot_loss_vs_x(single, fit),
        "ep": plot_loss_vs_epochs(data),
        "iso": plot_isoflop(single, fit),
        "res": plot_residuals(single, fit),
    }
    for name, fig in figs.items():
        paths = save_figure(fig, tmp_path / name)
        assert [p.suffix for p in paths] == [".png", ".svg"]
        assert all(p.stat().st_size > 1000 for p in paths)
        assert paths[0].read_bytes()[:4] == b"\x89PNG" and b"<svg" in paths[1].read_bytes()[:2000]


def test_report_from_a_runs_table(tmp_path):
    path = write_report(synthetic_runs(), tmp_path / "report", bootstrap=20, seed=0, workers=1)
    text = path.read_text()
    assert "DIVERGED" in text and "FAILED" in text
    assert "## Asymptotes compared" in text and "## data_constrained joint law (R^2" in text
    for line in text.splitlines():
        if line.startswith("!["):
            target = line[line.index("(") + 1 : -1]
            assert (path.parent / target).is_file(), target
            assert (path.parent / target).with_suffix(".svg").is_file()
    assert not list(path.parent.glob(".*.tmp*"))  # atomic writes leave no temporaries


def test_save_figure_keeps_a_dotted_stem(tmp_path):
    """Group stems of dotted keys (``--group-by data.epochs``) each get their own files."""
    import matplotlib.pyplot as plt

    made = []
    for stem in ("f-data.epochs=32", "f-data.epochs=64", "plain.png"):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        made.append(save_figure(fig, tmp_path / stem))
    names = [[p.name for p in paths] for paths in made]
    assert names == [["f-data.epochs=32.png", "f-data.epochs=32.svg"],
                     ["f-data.epochs=64.png", "f-data.epochs=64.svg"],
                     ["plain.png", "plain.svg"]]
    assert all(p.exists() for paths in made for p in paths)
