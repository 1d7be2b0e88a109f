"""Time ``status`` and ``collect`` over a synthetic sweep of 10,000 run directories.

Targets: status < 2 s, collect < 5 s. The sweep is N (5) x D (5) x lr (10) x
wd (4) x seed (10) = 10,000 runs: 70% COMPLETED with an evals.parquet (3 val evals + 3
train evals), 10% RUNNING (with Slurm job ids, so status makes its one scheduler poll),
5% FAILED, 5% PREEMPTED (with eval part files), 2% DIVERGED, 8% never started.

    python bench/lifecycle_scale.py [--runs-dir DIR] [--repeat 3]

Prints the best of ``--repeat`` timings for: ``sweep_states`` (disk + poll), the status
grid rendered to text, ``collect`` (including the atomic runs.parquet write), and the
``scalelab status`` / ``scalelab collect`` CLIs end to end (process start included).
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from rich.console import Console

from scalelab.store.layout import EVALS_FILE, PLAN_FILE, RUNS_FOLDER, STATUS_FILE
from scalelab.sweep.view.collect import collect
from scalelab.sweep.view.status import render_status, sweep_states

SIZES = [(f"cpu-{n}", n * 1000) for n in (50, 100, 250, 500, 1000)]
D_UNIQUE = [1_000_000, 2_000_000, 4_000_000, 8_000_000, 16_000_000]
LRS = [1e-4 * 2**i for i in range(10)]
WDS = [0.0, 0.1, 0.2, 0.4]
SEEDS = list(range(10))


def _state(i: int) -> str | None:
    r = (i * 37) % 100  # spread the states over the grid
    for limit, state in ((70, "COMPLETED"), (80, "RUNNING"), (85, "FAILED"), (90, "PREEMPTED"), (92, "DIVERGED")):
        if r < limit:
            return state
    return None


def build(sweep: Path) -> int:
    rows = []
    evals = pl.DataFrame({"run_id": ["x"] * 6, "step": [0, 50, 100, 50, 100, 100], "tokens": [0] * 6,
                          "split": ["val"] * 3 + ["train"] * 3, "loss": [5.0, 4.0, 3.5, 3.9, 3.4, 3.3]})
    combos = itertools.product(SIZES, D_UNIQUE, LRS, WDS, SEEDS)
    for i, ((preset, n), d, lr, wd, seed) in enumerate(combos):
        run_id = f"{i:08x}"
        name = f"{preset}_U{d}_lr{lr:.2g}_wd{wd}_s{seed}"
        run_dir = f"{RUNS_FOLDER}/{name}-{run_id}"
        rows.append({"run_id": run_id, "name": name, "run_dir": run_dir, "model.preset": preset,
                     "data.unique_tokens": d, "optim.lr": lr, "optim.weight_decay": wd, "seed": seed,
                     "member": 0, "N": n, "N_non_embedding": n // 2, "D_unique": d, "D_total": d,
                     "epochs": 1.0, "steps": 100, "flops": 6.0 * n * d, "gpu_hours": None})
        state = _state(i)
        if state is None:
            continue
        path = sweep / run_dir
        path.mkdir(parents=True)
        status = {"state": state, "attempts": 1, "job_ids": [f"9999999_{i}"] if state == "RUNNING" else [],
                  "steps_done": 100 if state == "COMPLETED" else 50, "wall_time_s": 12.5, "host": "node1"}
        (path / STATUS_FILE).write_text(json.dumps(status))
        if state == "COMPLETED":
            evals.write_parquet(path / EVALS_FILE)
        elif state == "PREEMPTED":
            (path / "evals").mkdir()
            evals.head(2).write_parquet(path / "evals" / "part-000000050.parquet")
    pl.DataFrame(rows).write_parquet(sweep / PLAN_FILE)
    return len(rows)


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def best_of(repeat: int, fn) -> tuple[tuple[float, float], object]:
    """(best wall seconds, CPU seconds of that repeat), and fn's result."""
    times, out = [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), _cpu()
        out = fn()
        times.append((time.perf_counter() - t0, _cpu() - c0))
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=None, help="where to build the sweep (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sweep = (args.runs_dir or Path(tmp)) / "scale"
        shutil.rmtree(sweep, ignore_errors=True)
        t0 = time.perf_counter()
        n = build(sweep)
        print(f"built {n} runs in {sweep} ({time.perf_counter() - t0:.1f} s)")

        load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
        t_states, frame = best_of(args.repeat, lambda: sweep_states(sweep))

        def render():
            console = Console(file=io.StringIO(), width=160, color_system=None)
            console.print(render_status(sweep_states(sweep), title="scale"))
            return console.file.getvalue()

        t_status, text = best_of(args.repeat, render)
        t_collect, runs = best_of(args.repeat, lambda: collect(sweep))
        assert runs.height == n and runs["final_loss"].null_count() == n - int(0.75 * n)
        t_cli_status, _ = best_of(1, lambda: subprocess.run([sys.executable, "-m", "scalelab", "status", str(sweep)],
                                                            capture_output=True, check=True))
        t_cli_collect, _ = best_of(1, lambda: subprocess.run([sys.executable, "-m", "scalelab", "collect",
                                                              str(sweep)], capture_output=True, check=True))
        counts = dict(frame.group_by("state").len().iter_rows())
        print(f"states: {counts}")
        print(f"status grid: {text.count(chr(10))} lines of text")
        print(f"load average before timing: {load}")
        print("                                           wall s   cpu s (all threads and children)")
        for label, (wall, cpu), note in (
            ("sweep_states (disk + one scheduler poll)", t_states, ""),
            ("status (states + grid render)", t_status, "target < 2 s"),
            ("collect (incl. runs.parquet write)", t_collect, "target < 5 s"),
            ("CLI `scalelab status` end to end", t_cli_status, ""),
            ("CLI `scalelab collect` end to end", t_cli_collect, ""),
        ):
            print(f"{label:42s} {wall:7.3f} {cpu:7.3f}   {note}")


if __name__ == "__main__":
    main()
