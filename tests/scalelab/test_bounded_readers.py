"""The last readers of run and sweep files that opened paths themselves now go through the
bounded reader (``analysis.tables.bounded_read``): a FIFO in place of the file is refused at
once instead of hanging the reader (a subprocess with a time limit shows the hang on the old
code), and a regular file still reads as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[2]
LIMIT_S = 60
"""Seconds a reader may take; each finishes in well under one."""

CASES = {
    "local final_loss": ("evals.parquet",
                         "from scalelab.sweep.run.backends.local import final_loss\n"
                         "print(final_loss(RUN))"),
    "wandb id": ("wandb-id",
                 "from scalelab.train.console.tracker import wandb_run_id\n"
                 "try:\n    print(wandb_run_id(RUN, 'x'))\nexcept OSError as e:\n"
                 "    print(type(e).__name__, e)"),
    "dcp metadata": (".metadata",
                     "from scalelab.train.checkpoint.dcp import _read_metadata\n"
                     "try:\n    _read_metadata(RUN)\nexcept Exception as e:\n"
                     "    print(type(e).__name__, e)"),
}


def _run(code: str, run_dir: Path) -> str:
    prog = f"from pathlib import Path\nRUN = Path({str(run_dir)!r})\n{code}\n"
    out = subprocess.run([sys.executable, "-c", prog], cwd=REPO, capture_output=True,
                         text=True, timeout=LIMIT_S)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("case", list(CASES))
def test_a_fifo_is_refused_not_waited_on(tmp_path, case):
    name, code = CASES[case]
    os.mkfifo(tmp_path / name)
    printed = _run(code, tmp_path)
    if case == "local final_loss":
        assert printed == "None"
    elif case == "wandb id":  # a FIFO holds no id, and the new one is not written over it
        assert printed.startswith("FileExistsError") and "refusing to replace it" in printed
    else:
        assert printed.startswith("Unreadable") and "FIFO" in printed


def test_regular_files_still_read(tmp_path):
    pl.DataFrame({"step": [1, 2], "split": ["val", "val"], "loss": [3.0, 2.5]}).write_parquet(
        tmp_path / "evals.parquet")
    (tmp_path / "wandb-id").write_text("x-0123abcd\n")
    assert _run(CASES["local final_loss"][1], tmp_path) == "2.5"
    assert _run(CASES["wandb id"][1], tmp_path) == "x-0123abcd"
