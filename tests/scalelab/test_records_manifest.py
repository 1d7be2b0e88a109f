"""Records that prove their integrity: a finished run's manifest.json (size and sha256 of
its record files), verified by ``collect`` with the run ids; a mismatch is named in
collect's line and in the report, and the run leaves the fits. Sweep-level parquet files
(plan, runs, ensembles) that are damaged: one line naming the file, exit 2."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from _train_util import make_token_dir, tiny_cfg
from test_bad_input import assert_one_line
from test_bad_input import cli as cli_subprocess

sys.path.insert(0, str(Path(__file__).resolve().parent / "sweep"))
from lifecycle_helpers import cli

from analysis.report.report import write_report_status
from scalelab.store.atomic import write_json_atomic, write_parquet_atomic
from scalelab.store.status import State, read_status
from scalelab.sweep.view.collect import collect
from scalelab.train import train
from scalelab.train.records.records_manifest import MARK, RECORD_FILES, verify_run

STEPS = 6


def _plan_row(run_dir: Path) -> dict:
    run_id = yaml.safe_load((run_dir / "config.yaml").read_text())["run_id"]
    return {"run_id": run_id, "name": run_dir.name.rsplit("-", 1)[0], "run_dir": f"runs/{run_dir.name}",
            "optim.lr": 0.01, "member": 0, "N": 1000, "N_non_embedding": 500, "D_unique": 100,
            "D_total": 100, "epochs": 1.0, "steps": STEPS, "flops": 6e5, "gpu_hours": None}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A sweep of two tiny runs that trained to COMPLETED (different seeds)."""
    root = tmp_path_factory.mktemp("manifest")
    data = make_token_dir(root / "tokens")
    sweep = root / "sweep"
    rows = []
    for seed in (1, 2):
        cfg = tiny_cfg(data, STEPS, "train.eval_every=2", "train.norms_every=3", f"train.init_seed={seed}")
        tmp = sweep / "runs" / f"tmp{seed}"
        assert train(cfg, tmp) == State.COMPLETED
        run_id = yaml.safe_load((tmp / "config.yaml").read_text())["run_id"]
        run_dir = tmp.with_name(f"s{seed}-{run_id}")
        tmp.rename(run_dir)
        rows.append(_plan_row(run_dir))
    write_parquet_atomic(sweep / "plan.parquet", pl.DataFrame(rows))
    return sweep


@pytest.fixture
def sweep(trained, tmp_path) -> Path:
    """A fresh copy of the trained sweep to damage."""
    shutil.copytree(trained, tmp_path / "sweep", symlinks=True)
    return tmp_path / "sweep"


def _runs(sweep: Path) -> list[Path]:
    return sorted((sweep / "runs").iterdir())


def _losses(data: bytes) -> list[float] | None:
    """The losses a file of ``data`` holds (pyarrow: a damaged file never aborts it), None
    when it does not decode."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
        table.validate(full=True)
        return table.column("loss").to_pylist()
    except (pa.ArrowException, OSError, ValueError, KeyError):
        return None


def _flip_a_loss_bit(path: Path) -> int:
    """Flip the first bit of ``path`` whose flip leaves a file that decodes, to other
    losses: what collect took silently before record manifests. Returns the bit."""
    original = path.read_bytes()
    before = _losses(original)
    for bit in range(len(original) * 8):
        data = bytearray(original)
        data[bit // 8] ^= 1 << (bit % 8)
        after = _losses(bytes(data))
        if after is not None and len(after) == len(before) and after != before:
            path.write_bytes(bytes(data))
            return bit
    raise AssertionError("no bit flip changes the losses")


def test_a_completed_run_writes_its_manifest_last_and_collect_verifies_it(sweep):
    run = _runs(sweep)[0]
    doc = json.loads((run / "manifest.json").read_text())
    assert sorted(doc["files"]) == sorted(RECORD_FILES)
    assert doc["step"] == STEPS and doc["run_id"] == _plan_row(run)["run_id"]
    newest = max((run / n).stat().st_mtime_ns for n in RECORD_FILES)
    assert (run / "manifest.json").stat().st_mtime_ns >= newest
    assert read_status(run)[MARK] == "manifest.json"
    frame = collect(sweep)
    assert frame["records_verified"].to_list() == [True, True]
    assert frame["records_note"].to_list() == [None, None]
    assert frame["final_loss"].is_not_null().all()


def test_one_flipped_bit_in_evals_is_named_and_the_run_leaves_the_fits(sweep, capsys):
    bad, good = _runs(sweep)
    _flip_a_loss_bit(bad / "evals.parquet")
    assert cli("collect", str(sweep)) == 0
    line = capsys.readouterr().out.strip()
    assert f"runs/{bad.name}: INVALID evals.parquet: sha256 mismatch" in line and "\n" not in line
    frame = pl.read_parquet(sweep / "runs.parquet").sort("run_dir")
    assert frame["state"].to_list() == ["COMPLETED", "COMPLETED"]  # state kept
    assert frame["records_verified"].to_list() == [False, True]
    assert frame["final_loss"][0] is None and frame["best_loss"][0] is None
    assert frame["final_loss"][1] is not None


@pytest.mark.parametrize("how", ["copy", "symlink"])
def test_a_run_directory_over_another_runs_is_a_wrong_run_id(sweep, how):
    a, b = _runs(sweep)
    shutil.rmtree(b)
    if how == "copy":
        shutil.copytree(a, b)
    else:
        os.symlink(a, b)
    frame = collect(sweep).sort("run_dir")
    want, held = _plan_row(a)["run_id"], frame["run_id"][1]
    note = frame["records_note"][1]
    assert note.startswith(f"INVALID config.yaml holds run {want}, not {held}"), note
    assert frame["records_verified"].to_list() == [True, False]
    assert frame["final_loss"][1] is None


def test_evals_of_another_run_are_a_wrong_run_id(sweep):
    """A run's evals replaced by another's, with a manifest rewritten to match: the ids."""
    a, b = _runs(sweep)
    shutil.copy(a / "evals.parquet", b / "evals.parquet")
    for run in (a, b):
        (run / "manifest.json").unlink()
        status = read_status(run)
        status.pop(MARK)
        status.pop("sha256")  # as written before status digests, too
        write_json_atomic(run / "status.json", status)
    frame = collect(sweep).sort("run_dir")
    assert frame["records_note"][1].startswith(f"INVALID evals.parquet holds run {frame['run_id'][0]}")
    assert frame["records_verified"].to_list() == [None, False]


def test_a_missing_manifest_is_corrupt_on_a_new_run_and_unverified_on_an_old_one(sweep, capsys):
    new, old = _runs(sweep)
    (new / "manifest.json").unlink()
    (old / "manifest.json").unlink()
    status = read_status(old)
    status.pop(MARK)  # as a run finished before record manifests
    status.pop("sha256")  # and before status digests
    write_json_atomic(old / "status.json", status)
    assert cli("collect", str(sweep)) == 0
    line = capsys.readouterr().out
    frame = pl.read_parquet(sweep / "runs.parquet").sort("run_dir")
    assert frame["records_note"][0] == "INVALID no manifest.json (status.json says the run wrote one)"
    assert frame["records_verified"].to_list() == [False, None]
    assert frame["final_loss"][0] is None and frame["final_loss"][1] is not None  # old: kept
    assert "1 finished run(s) unverified (no manifest.json" in line


@pytest.mark.parametrize("name", ["config.yaml", "metrics.parquet", "norms.parquet"])
def test_every_listed_file_is_verified(sweep, name):
    run = _runs(sweep)[0]
    run_id = _plan_row(run)["run_id"]
    data = bytearray((run / name).read_bytes())
    data[len(data) // 2] ^= 0x10
    (run / name).write_bytes(bytes(data))
    verdict = verify_run(run, run_id, read_status(run))
    assert verdict.verified is False and name in verdict.problem, verdict


def test_every_bit_flip_of_evals_is_detected(sweep):
    """The census: each bit of evals.parquet flipped (every 5th bit), verified each time."""
    run = _runs(sweep)[0]
    path, status, run_id = run / "evals.parquet", read_status(run), _plan_row(run)["run_id"]
    original = path.read_bytes()
    missed = []
    for bit in range(0, len(original) * 8, 5):
        data = bytearray(original)
        data[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(data))
        if verify_run(run, run_id, status).verified is not False:
            missed.append(bit)
    assert missed == []


def test_report_names_the_corrupt_record_file(tmp_path):
    n = [1e3, 3e3, 1e4, 3e4, 1e5, 3e5]
    runs = pl.DataFrame({
        "run_id": [f"id{i}" for i in range(7)], "run_dir": [f"runs/r{i}-id{i}" for i in range(7)],
        "state": ["COMPLETED"] * 7, "N": [*n, 1e6], "D_total": [1e6] * 7, "D_unique": [1e6] * 7,
        "final_loss": [2.0 + 30 * x ** -0.3 for x in n] + [None],
        "records_note": [None] * 6 + ["INVALID evals.parquet: sha256 mismatch"],
        "records_verified": [True] * 6 + [False],
    })
    path, _ = write_report_status(runs, tmp_path, bootstrap=0)
    text = path.read_text()
    assert "records of runs/r6-id6: INVALID evals.parquet: sha256 mismatch" in text
    assert "excluded 1 run(s) whose records failed verification" in text


# ------------------------------------------------------------------ sweep-level files
def _damage(path: Path, how: str) -> None:
    if how == "directory":
        path.unlink()
        path.mkdir()
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "junk":
        path.write_bytes(b"this is not parquet\n" * 10)
    else:  # truncate
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.fixture
def small_sweep(tmp_path) -> Path:
    """A sweep directory with plan.parquet, runs.parquet and ensembles/evals.parquet."""
    sweep = tmp_path / "sw"
    rows = [{"run_id": f"id{i}", "name": f"r{i}", "run_dir": f"runs/r{i}-id{i}", "N": 1000.0 * (i + 1)}
            for i in range(3)]
    write_parquet_atomic(sweep / "plan.parquet", pl.DataFrame(rows))
    write_parquet_atomic(sweep / "runs.parquet", pl.DataFrame(rows).with_columns(
        pl.lit("COMPLETED").alias("state"), pl.lit(3.0).alias("final_loss")))
    write_parquet_atomic(sweep / "ensembles" / "evals.parquet", pl.DataFrame(
        {"run_id": ["id0"], "method": ["logits"], "members": [2], "loss": [3.0]}))
    return sweep


@pytest.mark.parametrize("how", ["truncate", "junk", "directory", "empty"])
@pytest.mark.parametrize("name,args", [
    ("plan.parquet", ("status",)),
    ("ensembles/evals.parquet", ("fit", "--x", "K")),
])
def test_a_damaged_sweep_file_is_one_line_naming_it(small_sweep, tmp_path, name, args, how):
    path = small_sweep / name
    _damage(path, how)
    proc, _ = cli_subprocess(tmp_path, args[0], small_sweep, *args[1:])
    assert_one_line(proc, str(path))
