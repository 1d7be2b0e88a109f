"""An adaptive study's state proves its integrity (``scalelab.adaptive.record``;
``analysis.tables.sweep_manifest``).

``adaptive/study.yaml`` is the study that ``scalelab next SWEEP_DIR`` continues and that
``scalelab sweep`` keeps as the sweep's spec; ``adaptive/trajectory.parquet`` is read back to
append each round. Before they had manifests, one flipped bit in the study (``lr: 0.01`` ->
``lr: 0.03`` is one bit) silently changed the study that ``next`` proposed runs from, and a
damaged trajectory was read back and extended. Now each is written with a manifest, and a
damaged one is one line naming the file and what to do (exit 2), never used.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from _cli_exit import run_cli as run
from adaptive_train import spec_text

from analysis.adaptive.targets import Summary
from analysis.tables.sweep_manifest import hint_for, manifest_of
from scalelab.adaptive import record
from scalelab.adaptive.membership import kept_study
from scalelab.adaptive.source import resolve
from scalelab.adaptive.study import load_study
from scalelab.errors import UserError
from scalelab.store.sweep_files import read_sweep_file
from scalelab.sweep.spec.load import load_spec


def flip_bit(path: Path, offset: int, bit: int = 1) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


@pytest.fixture
def study(tmp_path):
    spec = tmp_path / "study.yaml"
    spec.write_text(spec_text())
    return spec, load_study(load_spec(spec))


def test_the_kept_study_has_a_manifest_and_a_flipped_bit_is_refused(tmp_path, study):
    spec, st = study
    sweep = tmp_path / "sweep"
    kept = record.remember_study(sweep, st)
    assert manifest_of(kept).is_file()
    assert resolve(sweep).spec.text == spec.read_text()  # intact: read back as written
    text = kept.read_text()
    at = text.index("nx")  # the study's name: 'n' (0x6e) -> 'l' (0x6c) is one bit
    flip_bit(kept, at)
    with pytest.raises(UserError) as err:
        resolve(sweep)
    line = str(err.value)
    assert str(kept) in line and "sha256 differs" in line and "scalelab next SPEC" in line
    assert "\n" not in line
    with pytest.raises(UserError, match="sha256 differs"):  # scalelab sweep's membership check
        kept_study(sweep, ["any"])


def test_next_on_a_damaged_study_exits_2_in_one_line(tmp_path, study, capsys):
    spec, st = study
    root = tmp_path / "root"
    code, _, err = run(["next", spec, "-n", 2, "--root", root, "-o", tmp_path / "b.yaml"], capsys)
    assert code == 0, err
    kept = root / "nx" / "adaptive" / "study.yaml"
    assert manifest_of(kept).is_file()
    flip_bit(kept, len(kept.read_bytes()) // 2)
    code, out, err = run(["next", root / "nx", "-n", 2, "-o", tmp_path / "c.yaml"], capsys)
    assert code == 2
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1 and str(kept) in lines[0] and "Traceback" not in out + err
    assert not (tmp_path / "c.yaml").exists()  # nothing proposed from the damaged study
    code, _, err = run(["next", spec, "-n", 2, "--root", root, "-o", tmp_path / "d.yaml"], capsys)
    assert code == 0, err  # the hint's remedy: the study's own spec records it again
    assert resolve(root / "nx").spec.text == spec.read_text()


def summary(value: float) -> Summary:
    return Summary("E", value, value - 0.01, value + 0.01, 0.02)


def test_a_damaged_trajectory_is_refused_never_extended(tmp_path):
    sweep = tmp_path / "sweep"
    for i in range(3):
        path = record.append_trajectory(sweep, i, 4 * (i + 1), 10.0 * (i + 1), "flops", summary(2.0 - i / 10), 2)
    traj = read_sweep_file(path)
    assert traj["round"].to_list() == [0, 1, 2] and traj["value"].to_list() == [2.0, 1.9, 1.8]
    before = path.read_bytes()
    flip_bit(path, len(before) // 2)
    damaged = path.read_bytes()
    with pytest.raises(UserError) as err:
        record.append_trajectory(sweep, 3, 16, 40.0, "flops", summary(1.7), 2)
    assert str(path) in str(err.value) and "move it aside" in str(err.value)
    assert path.read_bytes() == damaged  # not extended, not rewritten
    path.rename(path.with_name(path.name + ".damaged"))  # the remedy the line names
    new = record.append_trajectory(sweep, 3, 16, 40.0, "flops", summary(1.7), 2)
    assert read_sweep_file(new)["round"].to_list() == [3]


def test_round_files_carry_manifests(tmp_path):
    sweep = tmp_path / "sweep"
    frame = pl.DataFrame({"key": ["a", "b"], "gain": [0.5, math.nan], "selected": [True, False]})
    path = record.write_round(sweep, 1, frame)
    assert path.name == "round-001.parquet" and manifest_of(path).is_file()
    assert read_sweep_file(path).equals(frame, null_equal=True)
    assert record.next_round(sweep) == 2
    flip_bit(path, len(path.read_bytes()) // 2)
    with pytest.raises(UserError, match="sha256 differs"):
        read_sweep_file(path)


def test_hints_are_found_by_folder_and_name():
    """The adaptive study's hint is its own; a sweep named like a folder keeps its hints."""
    assert "scalelab next SPEC" in hint_for("/r/s/adaptive/study.yaml")
    assert hint_for("/r/s/study.yaml") == ""  # a user's spec file, not the kept study
    assert "move it aside" in hint_for("/r/s/adaptive/trajectory.parquet")
    assert "scalelab sweep SPEC" in hint_for("/r/adaptive/plan.parquet")  # a sweep named adaptive
    assert "scalelab collect" in hint_for("/r/ensembles/runs.parquet")
    assert hint_for("/r/s/runs/x-1/evals.parquet") == ""  # a run's own evals


def test_no_flip_of_the_kept_study_goes_unseen(tmp_path, study):
    """40 seeded single-bit flips anywhere in the kept study (its name, an lr, a key): each is
    refused by both readers, none changes the study they return."""
    import random

    spec, st = study
    kept = record.remember_study(tmp_path / "sweep", st)
    pristine = kept.read_bytes()
    rng = random.Random(2026)
    for _ in range(40):
        kept.write_bytes(pristine)
        flip_bit(kept, rng.randrange(len(pristine)), rng.randrange(8))
        with pytest.raises(UserError, match="sha256 differs"):
            resolve(tmp_path / "sweep")
        with pytest.raises(UserError, match="sha256 differs"):
            kept_study(tmp_path / "sweep", ["any"])
    kept.write_bytes(pristine)
    assert resolve(tmp_path / "sweep").spec.text == spec.read_text()
