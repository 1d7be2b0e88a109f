"""Tables printed off a terminal keep every digit (``scalelab.cli.wide``): rich fits a table
to 80 columns when stdout is a pipe, a file or a Slurm log, and printed ``scalelab compare``'s
sizes as ``20,00…`` and its intervals as ``(-0.2…``."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from scalelab.cli.wide import natural_width, print_wide


def test_a_table_wider_than_the_console_is_printed_whole_off_a_terminal():
    table = Table("N", "interval")
    table.add_row("400,000,000", "(-0.179234, -0.121145)")
    out = io.StringIO()
    print_wide(table, Console(file=out, width=20, highlight=False))
    text = out.getvalue()
    assert "400,000,000" in text and "(-0.179234, -0.121145)" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) == natural_width(table) > 20
    crushed = io.StringIO()
    Console(file=crushed, width=20).print(table)
    assert "…" in crushed.getvalue()  # what rich alone prints: the test can fail


def test_compare_through_a_pipe_keeps_every_digit(tmp_path):
    rng = np.random.default_rng(0)
    rows = [{"N": n, "D": 4e9, "loss": e + 400 * n**-0.34 + 0.003 * rng.standard_normal(), "recipe": r, "seed": s}
            for r, e in (("muon", 1.75), ("adamw", 1.85)) for n in (2e7, 5e7, 1e8, 2e8, 4e8) for s in (0, 1)]
    path = tmp_path / "runs.csv"
    pl.DataFrame(rows).write_csv(path)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-m", "scalelab", "compare", str(path), "muon", "adamw"],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "400,000,000" in done.stdout and "…" not in done.stdout, done.stdout
