"""status of a sweep with blocks: one grid per block, laid out from that block's runs, so an
axis a block does not vary (null in the plan for the blocks that do not set it) never shows."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import polars as pl
from rich.console import Console

from scalelab.store.atomic import write_parquet_atomic
from scalelab.sweep.view.status import render_status, sweep_states


def make_block_sweep(root: Path) -> Path:
    """Block 'lr' varies optim.lr (x N x D); block 'wd' varies optim.weight_decay only (its
    lr column is null); block 'one' is a single run that sets neither."""
    rows = []

    def add(block: str, n: int, d: int, lr: float | None, wd: float | None) -> None:
        i = len(rows)
        rows.append({"run_id": f"{i:08x}", "name": f"r{i}", "run_dir": f"runs/r{i}-{i:08x}",
                     "block": block, "optim.lr": lr, "optim.weight_decay": wd, "member": 0,
                     "N": n, "N_non_embedding": n // 2, "D_unique": d, "D_total": d,
                     "epochs": 1.0, "steps": 10, "flops": 6.0 * n * d, "gpu_hours": None})

    for n, d, lr in itertools.product([1000, 5000], [2000, 4000], [1e-3, 3e-3]):
        add("lr", n, d, lr, None)
    for n, wd in itertools.product([1000, 5000], [0.0, 0.4, 1.6]):
        add("wd", n, 2000, None, wd)
    add("one", 5000, 8000, None, None)
    write_parquet_atomic(root / "plan.parquet", pl.DataFrame(rows))
    return root


def grids(text: str) -> dict[str, str]:
    """The text of each block's grid, by block name."""
    parts = text.split("block ")[1:]
    return {part.split(":", 1)[0]: part for part in parts}


def test_each_block_shows_only_the_axes_it_varies(tmp_path):
    frame = sweep_states(make_block_sweep(tmp_path))
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(render_status(frame, title="sw"))
    text = console.file.getvalue()
    assert "None" not in text
    by_block = grids(text)
    assert list(by_block) == ["lr", "wd", "one"]  # plan order
    header = lambda block: next(ln for ln in by_block[block].splitlines() if ln.startswith("┃")).split()
    assert header("lr") == ["┃", "lr", "┃", "N", "┃", "2000", "┃", "4000", "┃"]
    assert "weight_decay" not in by_block["lr"]
    assert header("wd") == ["┃", "N", "┃", "0", "┃", "0.4", "┃", "1.6", "┃"]  # wd: the columns
    assert "lr" not in header("wd") and "2000" not in by_block["wd"]  # D does not vary there
    assert "lr" not in header("one") and "weight_decay" not in by_block["one"]
    assert by_block["lr"].startswith("lr: 8 runs") and by_block["one"].startswith("one: 1 run\n")
    assert "15 runs" in text.splitlines()[0]
