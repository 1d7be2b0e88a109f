"""Every file of a run directory and of a sweep directory, damaged every way in
``_fuzz.MUTATIONS``, read by every command that reads it: each exits 0 or 2, and no
exception escapes (no traceback). The promise of README.md, "Bad input ...": one line and
exit code 2, never a traceback; a corrupt file is named, never silently used.

``BOUND_MUTATIONS`` (a FIFO, a file one byte over its kind's size limit, a 3 GiB sparse
file) run at every path too, in one subprocess per mutation (``_worker``): a reader that
blocks is caught by the subprocess's timeout (and each command's alarm inside it, which
names the command), one that fills memory by the subprocess's peak RSS, held under 2 GiB.

The sweep is the analysis tests' small real one (``tests/analysis/_tiny_sweep.py``: debug
backend, ten runs and a data block), built once per worker; each case damages a copy.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "optim" / "tests"))  # _waits
from _fuzz import BOUND_MUTATIONS, MUTATIONS, fresh_copy, mutate, run_cli  # noqa: E402
from _shared_sweep import shared_tiny_sweep  # noqa: E402
from _tiny_sweep import SPEC  # noqa: E402

SWEEP = SPEC["name"]
RUN_FILES = ("config.yaml", "config-input.yaml", "status.json", "meta.json", "manifest.json",
             "metrics.parquet", "evals.parquet", "norms.parquet", "claim.json")
"""A run directory's files (claim.json is planted as a dead claim first), and the newest
checkpoint's files (``_resolve``)."""
SWEEP_FILES = ("spec.yaml", "plan.parquet", "runs.parquet")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return shared_tiny_sweep(tmp_path_factory)


def _target_run(sweep: Path) -> Path:
    """The run damaged: the first of the fitted block, a completed run."""
    return sorted((sweep / "runs").glob("cpu-50k*"))[0] if list((sweep / "runs").glob("cpu-50k*")) \
        else sorted(p for p in (sweep / "runs").iterdir() if p.is_dir())[0]


def _plant_claim(run: Path) -> None:
    """A claim of a process that is long gone (this host, pid 0x7ffffffe)."""
    import socket

    (run / "claim.json").write_text(json.dumps({
        "token": "f" * 32, "host": socket.gethostname(), "pid": 2**31 - 2, "backend": "local",
        "created": 1.0, "heartbeat": 1.0}))


CHEAP = ("status", "collect", "sweep", "retry", "explain", "train")
"""Commands run on every damaged file (each reads the sweep's or the run's state); the
costly readers run where the damaged file is one of their inputs (``READ_BY``)."""
READ_BY = {
    "fit": ("config.yaml", "manifest.json", "metrics.parquet", "evals.parquet", "runs.parquet",
            "plan.parquet"),
    "report": ("config.yaml", "meta.json", "manifest.json", "metrics.parquet", "evals.parquet",
               "norms.parquet", "runs.parquet", "plan.parquet", "spec.yaml"),
    "compare": ("manifest.json", "evals.parquet", "runs.parquet", "plan.parquet", "spec.yaml"),
}


def _commands(sweep: Path, run: Path, other: Path, out: Path, damaged: str = "",
              costly: tuple[str, ...] = tuple(READ_BY)) -> list[list[str]]:
    """The commands that read the damaged file ``damaged`` (a name; '' for all), made cheap
    (no bootstrap); of the costly ones only those in ``costly``."""
    every = {
        "status": ["status", str(sweep)],
        "collect": ["collect", str(sweep), "-q"],
        "fit": ["fit", str(sweep), "-q", "--bootstrap", "0", "--out", str(out / "fit")],
        "report": ["report", str(sweep), "-q", "--bootstrap", "0"],
        "compare": ["compare", str(sweep), "regularized", "standard", "--n-boot", "20"],
        "sweep": ["sweep", str(sweep / "spec.yaml"), "--dry-run", "--root", str(sweep.parent)],
        "retry": ["retry", str(sweep), "--executor", "debug"],
        "explain": ["explain", str(run), str(other)],
        "train": ["train", str(run / "config-input.yaml"), "--run-dir", str(run), "-q"],
    }
    return [args for name, args in every.items()
            if name in CHEAP or (name in costly and (not damaged or damaged in READ_BY[name]))]


def _files() -> list[str]:
    files = [f"run/{name}" for name in RUN_FILES] + ["run/checkpoint/state", "run/checkpoint/manifest"]
    return files + [f"sweep/{name}" for name in SWEEP_FILES]


def _cases() -> list[tuple[str, str]]:
    return [(f, how) for f in _files() for how in MUTATIONS]


def _resolve(where: str, sweep: Path, run: Path) -> Path:
    """The file a case damages; it must exist (a file this test names and the sweep lacks
    is a test to update, not a case to skip)."""
    kind, _, name = where.partition("/")
    if kind == "sweep":
        path = sweep / name
    elif name == "claim.json":
        _plant_claim(run)
        path = run / name
    elif name.startswith("checkpoint/"):
        step = sorted((run / "checkpoint").glob("step-*"))[-1]
        path = next(p for p in step.iterdir() if p.is_file() and p.name.startswith(name.split("/")[1]))
    else:
        path = run / name
    assert path.is_file(), f"{where}: the sweep has no {path}"
    return path


BOUND_COSTLY = ("report",)
"""The costly command run on ``BOUND_MUTATIONS``: it reads every file ``fit`` and
``compare`` read (``READ_BY``), through the same readers, at a third of their time."""


def _damage_and_read(pristine: Path, work: Path, where: str, how: str,
                     costly: tuple[str, ...] = tuple(READ_BY)) -> list[str]:
    """Damage ``where`` in a fresh copy of ``pristine`` under ``work`` as ``how`` says and
    run every command that reads it (of the costly ones, those in ``costly``); the failures
    (an exit other than 0 or 2, a traceback)."""
    sweep = fresh_copy(pristine, work / "root" / SWEEP)
    run = _target_run(sweep)
    others = sorted(p for p in (sweep / "runs").iterdir() if p.is_dir() and p != run)
    mutate(_resolve(where, sweep, run), how)
    failures = []
    for args in _commands(sweep, run, others[0], work, damaged=where.rpartition("/")[2], costly=costly):
        outcome = run_cli(args)
        if not outcome.ok:
            failures.append(outcome.describe(args))
    return failures


@pytest.mark.parametrize(("where", "how"), _cases(), ids=[f"{w}:{h}" for w, h in _cases()])
def test_damaged_file_gives_one_line_never_a_traceback(pristine, tmp_path, where, how):
    failures = _damage_and_read(pristine, tmp_path, where, how)
    assert not failures, f"{where} damaged ({how}):\n" + "\n\n".join(failures)


COMMAND_ALARM_S = 120
"""A command of the worker that has not returned by then is reported as hung (it blocks:
no command of this small sweep takes more than a few seconds)."""
WORKER_TIMEOUT_S = 600
"""The worker's whole budget (14 paths, about 8 commands each); past it, the test fails
naming the last command the worker started."""
MAX_RSS_BYTES = 2 << 30


class _Hung(Exception):
    pass


def _worker(pristine: str, work: str, how: str) -> None:
    """``python test_fuzz_files.py PRISTINE WORK HOW``: every path damaged ``how``, one JSON
    line per path on stdout ({where, failures}), then {maxrss_kb}; each command under an
    alarm, the one started named on stderr first."""
    def hung(signum, frame):
        raise _Hung(f"no return after {COMMAND_ALARM_S} s")

    signal.signal(signal.SIGALRM, hung)
    global run_cli
    inner = run_cli

    def timed(args):
        print(f"started: scalelab {' '.join(args)}", file=sys.__stderr__, flush=True)
        signal.alarm(COMMAND_ALARM_S)
        try:
            return inner(args)
        finally:
            signal.alarm(0)

    run_cli = timed
    for i, where in enumerate(_files()):
        failures = _damage_and_read(Path(pristine), Path(work) / str(i), where, how, BOUND_COSTLY)
        print(json.dumps({"where": where, "failures": failures}), flush=True)
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"maxrss_kb": max(usage, children)}), flush=True)


@pytest.mark.parametrize("how", BOUND_MUTATIONS)
def test_fifo_oversize_and_sparse_files_never_hang_nor_fill_memory(pristine, tmp_path, how):
    """Every path as a FIFO, one byte over its size limit, or a 3 GiB sparse file: each
    command exits 0 or 2 without a traceback, none blocks (the worker's timeout), and the
    worker's peak RSS stays under 2 GiB."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLARS_MAX_THREADS": "2"}
    try:
        done = subprocess.run([sys.executable, __file__, str(pristine), str(tmp_path), how],
                              capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, env=env,
                              cwd=Path(__file__).parent)
    except subprocess.TimeoutExpired as err:
        said = (err.stderr or b"").decode(errors="replace") if isinstance(err.stderr, bytes) else err.stderr or ""
        started = [ln for ln in said.splitlines() if ln.startswith("started: ")]
        pytest.fail(f"{how}: the worker ran past {WORKER_TIMEOUT_S} s; last {started[-1:]}")
    lines = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert done.returncode == 0 and lines and "maxrss_kb" in lines[-1], done.stderr[-3000:]
    assert [row["where"] for row in lines[:-1]] == _files()
    failures = [f"{row['where']}: {f}" for row in lines[:-1] for f in row["failures"]]
    assert not failures, f"{how}:\n" + "\n\n".join(failures)
    assert lines[-1]["maxrss_kb"] * 1024 < MAX_RSS_BYTES, lines[-1]


TABLE_COMMANDS = {
    "fit": ["-q", "--bootstrap", "0"],
    "report": ["-q", "--bootstrap", "0"],
    "compare": ["b", "a", "--n-boot", "20"],
    "transfer": ["--hp", "lr"],
}
"""The commands that take a table of runs (README.md, "Bring your own runs") in place of
a sweep, each cheap."""


def _runs_table_file(path: Path) -> Path:
    """A small valid table of runs: two recipes, 5 sizes, 3 lr values, 2 seeds."""
    import polars as pl

    rows = [{"N": n, "D": 1e6, "recipe": r, "seed": s, "lr": lr,
             "loss": e + 0.05 / (n / 1e6) ** 0.4 + 0.05 * (lr - 1) ** 2 + 0.001 * s}
            for r, e in (("a", 2.2), ("b", 2.0)) for n in (1e4, 2e4, 4e4, 8e4, 1.6e5)
            for lr in (0.5, 1.0, 2.0) for s in (0, 1)]
    frame = pl.DataFrame(rows)
    frame.write_parquet(path) if path.suffix == ".parquet" else frame.write_csv(path)
    return path


@pytest.mark.parametrize("how", [*MUTATIONS, "empty"])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_damaged_table_of_runs_gives_one_line_never_a_traceback(tmp_path, suffix, how):
    path = _runs_table_file(tmp_path / f"runs{suffix}")
    mutate(path, how)
    failures = []
    for command, extra in TABLE_COMMANDS.items():
        args = [command, str(path), *extra]
        outcome = run_cli(args)
        if not outcome.ok:
            failures.append(outcome.describe(args))
    assert not failures, f"{path.name} damaged ({how}):\n" + "\n\n".join(failures)


if __name__ == "__main__":
    _worker(*sys.argv[1:4])
