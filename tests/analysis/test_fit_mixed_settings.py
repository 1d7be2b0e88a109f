"""``scalelab fit`` says when the runs at one point of the law's variables differ in another
setting (``analysis.fit.grouped.mixed_settings_note``): an lr grid fitted as if its untuned
runs were seeds raises the law's loss (on the Muon-vs-AdamW study of test_joint_rows, 0.03
nats for a rate 3x off), and several D under a law in N alone average the budgets. Before,
the fit said nothing."""

import numpy as np
import polars as pl
from test_joint_rows import study

from analysis.fit.grouped import fit_selection, mixed_settings_note
from analysis.tables.external import to_runs_table


def _table() -> pl.DataFrame:
    """The study as a table from another trainer: N, D, U, loss, lr, optim.name, seed."""
    frame = study().rename({"optim.lr": "lr"}).drop("D_total", "D_unique")
    return to_runs_table(frame).runs


def test_an_lr_grid_fitted_as_seeds_is_named_per_group_and_gone_once_selected():
    table = _table()
    sel = fit_selection(table, law="data_constrained", by=["optim.name"])
    lines = [n for n in sel.notes if "differ in" in n]
    assert len(lines) == 2, sel.notes
    for name, line in zip(("adamw", "muon"), lines):
        assert line.startswith(f"optim.name={name}: 80 of 80 (N, D, U) point(s) hold runs that differ in lr:")
    one = fit_selection(table, law="data_constrained", by=["optim.name"], where=["lr=0.003"])
    assert not [n for n in one.notes if "differ in" in n], one.notes


def test_a_law_in_n_over_several_budgets_names_d_and_seeds_alone_are_no_setting():
    table = _table().filter((pl.col("lr") == 0.003) & (pl.col("optim.name") == "muon"))
    note = next(n for n in fit_selection(table, law="powerlaw").notes if "differ in" in n)
    assert note.startswith("5 of 5 N point(s) hold runs that differ in") and "D" in note.split(":")[0]
    by_d = [n for n in fit_selection(table, law="powerlaw", by=["D"]).notes if "differ in" in n]
    assert by_d and all("differ in U" in n for n in by_d)  # one D from several (U, epochs)
    assert not [n for n in fit_selection(table, law="powerlaw", by=["D", "U"]).notes if "differ in" in n]
    rng = np.random.default_rng(0)
    seeds = pl.DataFrame({"N": [1e7, 1e7, 2e7, 2e7], "D": [1e9] * 4, "loss": rng.uniform(3, 4, 4),
                          "seed": [0, 1, 0, 1]})
    assert mixed_settings_note(seeds, ("N", "D")) is None  # replicates are no setting
