"""Every file of a run directory and of a sweep directory, damaged every way in
``_fuzz.MUTATIONS``, read by every command that reads it: each exits 0 or 2, and no
exception escapes (no traceback). The promise of README.md, "Bad input ...": one line and
exit code 2, never a traceback; a corrupt file is named, never silently used.

The sweep is the analysis tests' small real one (``tests/analysis/_tiny_sweep.py``: debug
backend, ten runs and a data block), built once per worker; each case damages a copy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _fuzz import MUTATIONS, fresh_copy, mutate, run_cli  # noqa: E402
from _tiny_sweep import SPEC, build  # noqa: E402

SWEEP = SPEC["name"]
RUN_FILES = ("config.yaml", "config-input.yaml", "status.json", "meta.json", "manifest.json",
             "metrics.parquet", "evals.parquet", "norms.parquet", "claim.json")
"""A run directory's files (claim.json is planted as a dead claim first), and the newest
checkpoint's files (``_resolve``)."""
SWEEP_FILES = ("spec.yaml", "plan.parquet", "runs.parquet")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("fuzz_pristine"))


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


def _commands(sweep: Path, run: Path, other: Path, out: Path, damaged: str = "") -> list[list[str]]:
    """The commands that read the damaged file ``damaged`` (a name; '' for all), made cheap
    (no bootstrap)."""
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
            if name in CHEAP or not damaged or damaged in READ_BY[name]]


def _cases() -> list[tuple[str, str]]:
    files = [f"run/{name}" for name in RUN_FILES] + ["run/checkpoint/state", "run/checkpoint/manifest"]
    files += [f"sweep/{name}" for name in SWEEP_FILES]
    return [(f, how) for f in files for how in MUTATIONS]


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


@pytest.mark.parametrize(("where", "how"), _cases(), ids=[f"{w}:{h}" for w, h in _cases()])
def test_damaged_file_gives_one_line_never_a_traceback(pristine, tmp_path, where, how):
    sweep = fresh_copy(pristine, tmp_path / "root" / SWEEP)
    run = _target_run(sweep)
    others = sorted(p for p in (sweep / "runs").iterdir() if p.is_dir() and p != run)
    mutate(_resolve(where, sweep, run), how)
    failures = []
    for args in _commands(sweep, run, others[0], tmp_path, damaged=where.rpartition("/")[2]):
        outcome = run_cli(args)
        if not outcome.ok:
            failures.append(outcome.describe(args))
    assert not failures, f"{where} damaged ({how}):\n" + "\n\n".join(failures)


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
