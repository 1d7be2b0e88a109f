"""One freshness rule for ``<sweep>/runs.parquet`` (``scalelab.sweep.view.collect.
runs_table_stale``), shared by ``fit``, ``report``, ``compare`` and ``next``: a command run
after a run finished sees that run, and a fresh table is not collected again."""

from __future__ import annotations

import os
import shutil

import polars as pl
import pytest
from _cli_exit import exit_code as run

from analysis.tables.layout import PLAN_FILE, RUNS_FILE, RUNS_FOLDER, SPEC_FILE, STATUS_FILE
from scalelab.sweep.view.collect import collect, runs_table_stale


@pytest.fixture()
def sweep(tiny_sweep, tmp_path):
    copy = shutil.copytree(tiny_sweep, tmp_path / tiny_sweep.name)
    collect(copy)
    return copy


def _set_mtime(path, table, seconds: float) -> None:
    """Set ``path``'s mtime ``seconds`` after the runs table's (negative: before)."""
    t = os.stat(table).st_mtime + seconds
    os.utime(path, (t, t))


def _completed_run(sweep) -> tuple[str, os.PathLike]:
    runs = pl.read_parquet(sweep / RUNS_FILE).filter(pl.col("state") == "COMPLETED")
    row = runs.row(0, named=True)
    return row["run_id"], sweep / row["run_dir"]


def test_the_rule(sweep):
    assert not runs_table_stale(sweep)
    _, run_dir = _completed_run(sweep)
    for path in (run_dir / STATUS_FILE, sweep / SPEC_FILE, run_dir):
        assert not runs_table_stale(sweep)
        _set_mtime(path, sweep / RUNS_FILE, 10)  # written after the runs table
        assert runs_table_stale(sweep), path
        _set_mtime(path, sweep / RUNS_FILE, -10)
        assert not runs_table_stale(sweep)
    (sweep / RUNS_FOLDER / "new-run").mkdir()  # a run directory the table has not seen
    _set_mtime(sweep / RUNS_FOLDER / "new-run", sweep / RUNS_FILE, 10)
    assert runs_table_stale(sweep)
    (sweep / RUNS_FILE).unlink()
    assert runs_table_stale(sweep)


@pytest.mark.parametrize("command", [["fit", "--bootstrap", "0"], ["report", "--bootstrap", "0"]])
def test_a_command_after_a_run_finished_sees_it(sweep, command, capsys):
    """The runs table was collected while a run was unfinished; the run finished since (its
    status.json is newer): fit and report both collect again and see it COMPLETED."""
    run_id, run_dir = _completed_run(sweep)
    table = sweep / RUNS_FILE
    early = pl.read_parquet(table).with_columns(
        pl.when(pl.col("run_id") == run_id).then(pl.lit("RUNNING")).otherwise(pl.col("state"))
        .alias("state"),
        pl.when(pl.col("run_id") == run_id).then(None).otherwise(pl.col("final_loss"))
        .alias("final_loss"))
    early.write_parquet(table)
    _set_mtime(table, table, -60)  # collected a minute ago
    for path in [sweep / SPEC_FILE, sweep / PLAN_FILE, sweep / RUNS_FOLDER, *(sweep / RUNS_FOLDER).iterdir()]:
        for p in [path, *(path.iterdir() if path.is_dir() else [])]:
            _set_mtime(p, table, -60)  # everything else is older than the table
    _set_mtime(run_dir / STATUS_FILE, table, 30)  # the run finished after that collect
    assert run([command[0], str(sweep), *command[1:]]) == 0
    assert "collecting" in capsys.readouterr().out
    after = pl.read_parquet(table).filter(pl.col("run_id") == run_id)
    assert after["state"].to_list() == ["COMPLETED"] and after["final_loss"][0] is not None
    # fresh now: the same command does not collect again
    assert run([command[0], str(sweep), *command[1:]]) == 0
    assert "collecting" not in capsys.readouterr().out
