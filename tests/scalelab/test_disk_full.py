"""A full disk is one line for every command: the file it could not write and "disk full",
exit 2, and the file it was replacing keeps its old bytes (issue 36: ``collect`` on a full
disk gave polars' ``ComputeError`` "Invalid thrift").

A full disk is simulated where every atomic write passes: ``os.fsync`` of the temporary
file raises ENOSPC (as a delayed-allocation file system reports it), and, where said,
polars writing parquet to a file fails as it does on a full disk, with "Invalid thrift:
transport error" and no errno.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from test_bounded_work import ensemble_sweep

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _fuzz import run_cli  # noqa: E402

TABLE = "N,D,loss,recipe,seed,lr\n" + "".join(
    f"{n},1e6,{e + 0.05 / (n / 1e6) ** 0.4 + 0.05 * (lr - 1) ** 2 + 0.001 * s},{r},{s},{lr}\n"
    for r, e in (("a", 2.2), ("b", 2.0)) for n in (1e4, 2e4, 4e4, 8e4, 1.6e5)
    for lr in (0.5, 1.0, 2.0) for s in (0, 1))
"""A table of runs from any trainer (README 'Bring your own runs'): fit and transfer read it."""

SPEC = {"name": "one", "launcher": {"executor": "debug"}, "base": {
    "model": {"preset": "cpu-50k", "n_layers": 1},
    "data": {"dataset": "default", "seq_len": 16, "unique_tokens": 256, "epochs": 1, "val_tokens": 1024},
    "train": {"batch_size": 8, "eval_every": 0, "eval_batches": 1, "norms_every": 0,
              "checkpoint_every": 1000, "device": "cpu"}}}
"""A one-run sweep (2 steps), trained in this process by the debug executor."""


def _full_disk(monkeypatch, *, polars_too: bool = False) -> None:
    """Every atomic write fails as on a full disk from now on (see the module docstring)."""
    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", fsync)
    if polars_too:
        real = pl.DataFrame.write_parquet

        def write_parquet(self, file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)):
                raise pl.exceptions.ComputeError("parquet: File out of specification: Invalid thrift: "
                                                 "transport error")
            return real(self, file, *args, **kwargs)

        monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)


def _assert_disk_full(outcome, path: Path) -> None:
    assert outcome.code == 2 and not outcome.escaped, outcome.describe([])
    lines = outcome.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: {path}: disk full: free space and rerun"), outcome.stderr
    assert not [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]  # no temporary


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("disk_full")
    spec = root / "one.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    assert run_cli(["sweep", str(spec), "--root", str(root), "-q"]).code == 0
    table = root / "runs.csv"
    table.write_text(TABLE)
    return {"spec": spec, "sweep": root / "one", "table": table, "ensemble": ensemble_sweep(root)}


def test_collect_on_a_full_disk_keeps_the_old_runs_table(world, monkeypatch):
    runs = world["sweep"] / "runs.parquet"
    assert run_cli(["collect", str(world["sweep"]), "-q"]).code == 0
    before = runs.read_bytes()
    _full_disk(monkeypatch, polars_too=True)
    _assert_disk_full(run_cli(["collect", str(world["sweep"]), "-q"]), runs)
    assert runs.read_bytes() == before


@pytest.mark.parametrize("command", ["fit", "transfer"])
def test_a_figure_on_a_full_disk_keeps_the_old_one(world, tmp_path, monkeypatch, command):
    args = {"fit": ["fit", str(world["table"]), "-q", "--bootstrap", "0"],
            "transfer": ["transfer", str(world["table"]), "--hp", "lr"]}[command]
    args += ["--out", str(tmp_path / "out")]
    assert run_cli(args).code == 0
    figure = tmp_path / "out.png"
    before = figure.read_bytes()
    _full_disk(monkeypatch)
    _assert_disk_full(run_cli(args), figure)
    assert figure.read_bytes() == before


def test_ensemble_on_a_full_disk_keeps_the_old_evals(world, monkeypatch):
    sweep = world["ensemble"]
    out = sweep / "ensembles" / "evals.parquet"
    assert run_cli(["ensemble", str(sweep), "--device", "cpu"]).code == 0
    before = out.read_bytes()
    _full_disk(monkeypatch, polars_too=True)
    _assert_disk_full(run_cli(["ensemble", str(sweep), "--device", "cpu"]), out)
    assert out.read_bytes() == before


def test_train_and_plan_export_on_a_full_disk(world, tmp_path, monkeypatch):
    _full_disk(monkeypatch, polars_too=True)
    run = tmp_path / "run"
    _assert_disk_full(run_cli(["train", str(world["spec"].parents[0] / "one" / "runs" / _first_run(world)
                                         / "config.yaml"), "--run-dir", str(run), "-q"]),
                      run / "config.yaml")
    plan = tmp_path / "plan.parquet"
    outcome = run_cli(["sweep", str(world["spec"]), "--dry-run", "-o", str(plan)])
    assert outcome.code == 2 and not outcome.escaped, outcome.describe([])
    assert f"{plan}" in outcome.stderr and "No space left on device" in outcome.stderr
    assert not plan.exists()


def _first_run(world) -> str:
    return sorted(p.name for p in (world["sweep"] / "runs").iterdir())[0]


def test_a_writer_that_hides_the_errno_reads_as_disk_full(tmp_path, monkeypatch):
    """numpy's ``tofile`` on a full disk: OSError('N requested and M written'), no errno."""
    import scalelab.store.atomic as atomic

    def tofile(path: Path) -> None:
        path.write_bytes(b"partial")
        raise OSError("4096 requested and 7 written")

    target = tmp_path / "tokens.bin"
    target.write_bytes(b"good")
    monkeypatch.setattr(atomic, "disk_full", lambda folder: True, raising=False)
    with pytest.raises(OSError) as err:
        atomic.write_atomic(target, tofile)
    assert (err.value.errno, err.value.filename) == (errno.ENOSPC, str(target))
    monkeypatch.setattr(atomic, "disk_full", lambda folder: False)
    with pytest.raises(OSError, match="4096 requested and 7 written") as err:
        atomic.write_atomic(target, tofile)
    assert err.value.errno is None
    assert target.read_bytes() == b"good" and sorted(os.listdir(tmp_path)) == ["tokens.bin"]


FULL_DISK_MESSAGES = (
    "parquet: File out of specification: underlying IO error: No space left on device (os error 28)",
    "Disk quota exceeded (os error 122)",
)
"""How polars (Rust) quotes ENOSPC and EDQUOT in its own errors."""


def test_a_library_error_quoting_a_full_disk_is_one_line(world, monkeypatch):
    """Quoting ENOSPC or EDQUOT: one line. Any other library error is a bug, shown as one."""
    import scalelab.ensemble.evaluate as ev

    for message in (*FULL_DISK_MESSAGES, "parquet: File out of specification: Invalid thrift"):
        def evaluate_sweep(*args, message=message, **kwargs):
            raise pl.exceptions.ComputeError(message)

        monkeypatch.setattr(ev, "evaluate_sweep", evaluate_sweep)
        outcome = run_cli(["ensemble", str(world["ensemble"]), "--device", "cpu"])
        if message in FULL_DISK_MESSAGES:
            assert outcome.code == 2 and not outcome.escaped, outcome.describe([])
            assert outcome.stderr.startswith("error: disk full") and len(outcome.stderr.splitlines()) == 1
        else:
            assert "ComputeError" in outcome.escaped, outcome.describe([])


def test_a_checkpoint_on_a_full_disk_is_enospc_naming_it(tmp_path, monkeypatch):
    """torch.save on a full disk raises RuntimeError("unexpected pos ...") without an errno
    (measured on a 16 MiB tmpfs): the save reads it as ENOSPC naming the checkpoint, leaves
    no temporary directory, and keeps the previous checkpoint."""
    import torch

    from scalelab.train.checkpoint import directory

    run = tmp_path / "run"
    directory.save_checkpoint(run, 1, {"w": torch.zeros(3)})

    def full(*_a, **_k):
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0")

    monkeypatch.setattr(directory.torch, "save", full)
    monkeypatch.setattr(directory, "disk_full", lambda folder: True)
    with pytest.raises(OSError) as err:
        directory.save_checkpoint(run, 2, {"w": torch.ones(3)})
    assert err.value.errno == errno.ENOSPC and err.value.filename.endswith("step-000000002/state.pt")
    root = run / "checkpoint"
    assert sorted(p.name for p in root.iterdir()) == ["step-000000001"]
    monkeypatch.setattr(directory, "disk_full", lambda folder: False)  # not full: torch's own error
    with pytest.raises(RuntimeError, match="unexpected pos"):
        directory.save_checkpoint(run, 3, {"w": torch.ones(3)})
