"""Sweep-level files prove their integrity (``analysis.tables.sweep_manifest``):
``spec.yaml``, ``plan.parquet`` and ``runs.parquet`` carry a manifest; a damaged plan or
spec copy is one line naming the file and what to do, ``scalelab sweep SPEC`` writes both
again without retraining a run, and a damaged or unvouched ``runs.parquet`` is collected
again. A full disk while collecting leaves nothing a later read takes for valid.

The sweep is the analysis tests' small real one (``tests/analysis/_tiny_sweep.py``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _fuzz import run_cli  # noqa: E402
from _shared_sweep import shared_tiny_sweep  # noqa: E402

COVERED = ("spec.yaml", "plan.parquet", "runs.parquet")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return shared_tiny_sweep(tmp_path_factory)


@pytest.fixture
def sweep(pristine, tmp_path) -> Path:
    """A copy of the pristine sweep (and its spec file beside it) under ``tmp_path/root``."""
    root = tmp_path / "root"
    shutil.copytree(pristine, root / pristine.name, symlinks=True)
    shutil.copyfile(pristine.parent / "tiny_report.yaml", root / "tiny_report.yaml")
    return root / pristine.name


def _flip(path: Path, at: float = 0.5, bit: int = 2) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 1 << bit
    path.write_bytes(bytes(data))


def _one_line(outcome, *needles: str) -> str:
    assert outcome.ok and outcome.code == 2, outcome.describe([])
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_each_sweep_file_has_a_manifest_that_matches_it(pristine):
    for name in COVERED:
        data = (pristine / name).read_bytes()
        doc = json.loads((pristine / f"{name}.manifest.json").read_text())
        assert doc == {"format": 1, "file": name, "size": len(data),
                       "sha256": hashlib.sha256(data).hexdigest()}


def test_a_flipped_plan_is_one_line_and_sweep_plans_it_again_retraining_nothing(pristine, sweep):
    _flip(sweep / "plan.parquet")
    _one_line(run_cli(["status", str(sweep)]), "plan.parquet", "manifest", "scalelab sweep SPEC")
    _one_line(run_cli(["collect", str(sweep), "-q"]), "plan.parquet")
    statuses = {p: p.read_bytes() for p in sweep.glob("runs/*/status.json")}
    outcome = run_cli(["sweep", str(sweep.parent / "tiny_report.yaml"), "--root", str(sweep.parent)])
    assert outcome.code == 0, outcome.describe([])
    assert "writing plan.parquet again from this spec's 13 runs" in outcome.stderr
    # the plan as it was, with its manifest; no run launched again (their status untouched)
    assert (sweep / "plan.parquet").read_bytes() == (pristine / "plan.parquet").read_bytes()
    assert (sweep / "plan.parquet.manifest.json").read_bytes() == \
        (pristine / "plan.parquet.manifest.json").read_bytes()
    assert {p: p.read_bytes() for p in sweep.glob("runs/*/status.json")} == statuses
    assert run_cli(["status", str(sweep)]).code == 0


def test_a_flipped_spec_copy_is_one_line_and_sweep_writes_it_again(pristine, sweep):
    _flip(sweep / "spec.yaml", at=0.4, bit=0)
    _one_line(run_cli(["collect", str(sweep), "-q"]), "spec.yaml", "manifest")
    _one_line(run_cli(["retry", str(sweep), "--executor", "debug"]), "spec.yaml")
    outcome = run_cli(["sweep", str(sweep.parent / "tiny_report.yaml"), "--root", str(sweep.parent)])
    assert outcome.code == 0, outcome.describe([])
    assert (sweep / "spec.yaml").read_bytes() == (pristine / "spec.yaml").read_bytes()
    assert run_cli(["collect", str(sweep), "-q"]).code == 0


def test_a_damaged_manifest_is_one_line_too(sweep):
    (sweep / "plan.parquet.manifest.json").write_text("{not json")
    _one_line(run_cli(["status", str(sweep)]), "plan.parquet", "manifest")


def test_a_flipped_runs_table_is_collected_again(pristine, sweep, capsys):
    from scalelab.cli.runs_table import read_runs_table
    from scalelab.store.sweep_files import read_sweep_file

    want = read_sweep_file(pristine / "runs.parquet")
    _flip(sweep / "runs.parquet")
    got = read_runs_table(sweep)
    assert "runs.parquet does not match its manifest" in capsys.readouterr().out
    assert got.drop("run_dir").equals(want.drop("run_dir"))
    assert (sweep / "runs.parquet").read_bytes() == (pristine / "runs.parquet").read_bytes()


def test_a_full_disk_while_collecting_leaves_nothing_taken_for_valid(pristine, sweep, monkeypatch):
    """ENOSPC on runs.parquet leaves the old table and its manifest (a whole pair, stale by
    its mtime rule or not); ENOSPC on the manifest after the table leaves a table that no
    manifest vouches for: stale, and a direct read of it is one line."""
    import scalelab.store.sweep_files as sweep_files
    from scalelab.errors import UserError
    from scalelab.sweep.view.collect import collect, stale_reason

    real = sweep_files.write_bytes_atomic
    (sweep / "runs.parquet").unlink()  # so that a new table differs from nothing on disk
    (sweep / "runs.parquet.manifest.json").unlink()

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(sweep_files, "write_bytes_atomic", full)
    with pytest.raises(OSError, match="No space left"):
        collect(sweep)
    assert not (sweep / "runs.parquet").exists() and stale_reason(sweep) == "runs.parquet missing"

    shutil.copyfile(pristine / "runs.parquet.manifest.json", sweep / "runs.parquet.manifest.json")
    calls = []

    def manifest_full(path, data):
        calls.append(Path(path).name)
        if Path(path).name.endswith(".manifest.json"):
            full(path, data)
        return real(path, data)

    monkeypatch.setattr(sweep_files, "write_bytes_atomic", manifest_full)
    _flip(sweep / "runs" / sorted(p.name for p in (sweep / "runs").iterdir())[0] / "status.json", 0.0, 0)
    with pytest.raises(OSError, match="No space left"):
        collect(sweep)
    assert calls == ["runs.parquet", "runs.parquet.manifest.json"]
    assert "does not match its manifest" in stale_reason(sweep)
    with pytest.raises(UserError, match="runs.parquet.*manifest"):
        sweep_files.read_sweep_file(sweep / "runs.parquet")


def test_a_sweep_from_before_manifests_still_reads_and_gains_them(pristine, sweep):
    from scalelab.sweep.run.launch import read_plan, sweep_spec
    from scalelab.sweep.view.collect import collect, stale_reason

    for name in COVERED:
        (sweep / f"{name}.manifest.json").unlink()
    assert read_plan(sweep).height == 13 and sweep_spec(sweep).name == "tiny_report"
    assert stale_reason(sweep) == "runs.parquet has no manifest"
    collect(sweep)
    assert stale_reason(sweep) is None
    assert (sweep / "runs.parquet.manifest.json").is_file()
    outcome = run_cli(["sweep", str(sweep.parent / "tiny_report.yaml"), "--root", str(sweep.parent)])
    assert outcome.code == 0, outcome.describe([])
    for name in COVERED:
        assert (sweep / f"{name}.manifest.json").read_bytes() == \
            (pristine / f"{name}.manifest.json").read_bytes(), name
