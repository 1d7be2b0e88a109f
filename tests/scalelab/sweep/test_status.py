"""status: effective states of a sweep, the grid layout, one poll per sweep, the CLI."""

from __future__ import annotations

import io
import itertools
import sys
from pathlib import Path

import polars as pl
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import cli

from scalelab.store.atomic import write_parquet_atomic
from scalelab.store.status import State, update_status
from scalelab.sweep.run import observe as observe_mod
from scalelab.sweep.view.status import GLYPHS, grid_axes, render_status, sweep_states

CYCLE = ["COMPLETED", "RUNNING", "FAILED", "DIVERGED", "PREEMPTED", None]


def make_sweep(root: Path) -> tuple[Path, list]:
    """48 runs: N x D_unique x optimizer x lr x seed, states cycling through CYCLE."""
    rows, states = [], []
    combos = itertools.product([1000, 5000], [2000, 4000, 8000], ["adamw", "muon"], [1e-3, 3e-3], [0, 1])
    for i, (n, d, opt, lr, seed) in enumerate(combos):
        run_dir = f"runs/r{i}-{i:08x}"
        rows.append({"run_id": f"{i:08x}", "name": f"r{i}", "run_dir": run_dir, "model.preset": f"p{n}",
                     "data.unique_tokens": d, "optim.name": opt, "optim.lr": lr, "seed": seed,
                     "member": 0, "N": n, "N_non_embedding": n // 2, "D_unique": d, "D_total": d,
                     "epochs": 1.0, "steps": 10, "flops": 6.0 * n * d, "gpu_hours": None})
        state = CYCLE[i % len(CYCLE)]
        states.append(state)
        if state is not None:
            (root / run_dir).mkdir(parents=True)
            update_status(root / run_dir, State(state), job_ids=[f"9_{i}"] if state == "RUNNING" else [])
    write_parquet_atomic(root / "plan.parquet", pl.DataFrame(rows))
    return root, states


def test_states_grid_and_one_poll(tmp_path, monkeypatch):
    sweep, states = make_sweep(tmp_path / "sw")
    polls = []

    def poll(ids):
        polls.append(sorted(ids))
        return {j: "RUNNING" for j in polls[-1]}

    monkeypatch.setattr(observe_mod, "poll_scheduler", poll)
    frame = sweep_states(sweep)
    assert len(polls) == 1 and len(polls[0]) == states.count("RUNNING")  # one batched poll
    assert frame["state"].to_list() == states  # RUNNING: their jobs live on per the scheduler
    # rows N, columns D, a panel per (optimizer, lr); seeds share a cell
    assert grid_axes(frame) == ("N", "D_unique", ["optim.name", "optim.lr"])

    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(render_status(frame, title="sw"))
    text = console.file.getvalue()
    header = next(line for line in text.splitlines() if "8000" in line)
    assert header.split() == ["┃", "name", "┃", "lr", "┃", "N", "┃", "2000", "┃", "4000", "┃", "8000", "┃"]
    assert "columns: D_unique" in text
    assert text.count("├") == 3  # one section per (optimizer, lr): 4 sections
    body = text.split("\n", 1)[1].rsplit("\n", 3)[0]  # without the summary and legend lines
    for state in set(states):
        assert body.count(GLYPHS[state][0]) == states.count(state), state
    assert "48 runs" in text


def test_lost_running_run_is_preempted(tmp_path, monkeypatch):
    sweep, states = make_sweep(tmp_path / "sw")
    monkeypatch.setattr(observe_mod, "poll_scheduler", lambda ids: dict.fromkeys(ids, "CANCELLED"))
    frame = sweep_states(sweep)
    assert frame["state"].to_list() == ["CANCELLED" if s == "RUNNING" else s for s in states]
    monkeypatch.setattr(observe_mod, "poll_scheduler", lambda ids: {})  # jobs unknown: lost
    frame = sweep_states(sweep)
    assert frame["state"].to_list() == ["PREEMPTED" if s == "RUNNING" else s for s in states]


def test_status_cli(tmp_path, capsys):
    sweep, _ = make_sweep(tmp_path / "sw")
    assert cli("status", str(sweep)) == 0
    out = capsys.readouterr().out
    assert "columns: D_unique" in out and "✔" in out
    assert cli("status", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "not a sweep directory" in err and err.count("\n") == 1 and "Traceback" not in err
