"""Corrupt record files: junk or truncated metrics/evals/norms parquet,
compacted or a part. Reading names the file in one line; a relaunch sets the file aside
(never deletes it), goes on from the readable files and says which steps are lost;
``scalelab status`` and ``collect`` mark the run and do not crash."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from _train_util import cli_env, make_token_dir, signal_at_step, tiny_cfg, write_cfg_yaml
from _waits import CEILING_S

sys.path.insert(0, str(Path(__file__).resolve().parent / "sweep"))
from lifecycle_helpers import cli

from scalelab.store.atomic import write_parquet_atomic
from scalelab.store.status import State, read_status, update_status
from scalelab.sweep.view.collect import collect
from scalelab.sweep.view.status import sweep_states
from scalelab.train import step as step_mod
from scalelab.train import train
from scalelab.train.records.record_files import SET_ASIDE_MARK, CorruptRecordError, read_record_file
from scalelab.train.records.record_gaps import lost_steps, uncovered
from scalelab.train.records.records import Records, read_table
from scalelab.train.records.records_check import check_records


def damage(path: Path, how: str) -> None:
    """'junk': the file replaced by text; 'truncated': its second half cut off."""
    if how == "junk":
        path.write_bytes(b"this is not parquet at all\n" * 20)
    else:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


def set_aside_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if SET_ASIDE_MARK in p.name)


def log_rows(rec: Records, steps) -> None:
    for s in steps:
        rec.add("metrics", step=s, tokens=s * 10, epoch=s / 100, lr=1e-3, train_loss=5.0 - s / 10,
                grad_norm=1.0, step_time_s=0.01)


def parts_at(run_dir: Path, *flushes: int) -> Records:
    """metrics parts flushed at each step of ``flushes`` (rows of every step from 1)."""
    rec, done = Records(run_dir, "r"), 0
    for step in flushes:
        log_rows(rec, range(done + 1, step + 1))
        rec.flush(step)
        done = step
    return rec


# ------------------------------------------------------------------ detection
@pytest.mark.parametrize("how", ["junk", "truncated"])
@pytest.mark.parametrize("which", ["compacted", "part"])
def test_reading_a_corrupt_file_names_it_in_one_line(tmp_path, which, how):
    rec = parts_at(tmp_path, 5, 10)
    if which == "compacted":
        rec.compact()
    path = tmp_path / "metrics.parquet" if which == "compacted" else \
        tmp_path / "metrics" / "part-000000010.parquet"
    damage(path, how)
    with pytest.raises(CorruptRecordError) as exc:
        read_table(tmp_path, "metrics")
    msg = str(exc.value)
    assert msg.startswith(f"{path}: corrupt record file (") and "\n" not in msg
    assert ("truncated" if how == "truncated" else "not parquet") in exc.value.reason


def test_wrong_schema_and_undecodable_pages_are_corrupt_too(tmp_path):
    path = tmp_path / "evals.parquet"
    pl.DataFrame({"step": [1], "split": ["val"]}).write_parquet(path)
    with pytest.raises(CorruptRecordError, match=r"missing column\(s\) loss"):
        read_record_file(path, {"step": pl.Int64, "split": pl.String, "loss": pl.Float64})
    pl.DataFrame({"step": list(range(500)), "loss": [float(i) for i in range(500)]}).write_parquet(path)
    data = bytearray(path.read_bytes())
    data[100:400] = bytes(300)  # pages zeroed, both PAR1 magics intact
    path.write_bytes(bytes(data))
    assert check_records(str(tmp_path)).corrupt == ()  # passes the quick check ...
    with pytest.raises(CorruptRecordError):  # ... but not a read
        read_record_file(path, {"step": pl.Int64, "loss": pl.Float64})


# ------------------------------------------------------------------ recovery
def test_uncovered_steps():
    assert uncovered([(0, 5), (11, 15)], 15) == [(6, 10)]
    assert uncovered([(0, 15)], 10) == []
    assert uncovered([], 3) == [(0, 3)]
    assert uncovered([(3, 4), (0, 1)], 6) == [(2, 2), (5, 6)]
    # parts 5, 10, 15 with 10 corrupt: its steps 6-10; beyond the resume point: nothing
    assert lost_steps(None, [5, 10, 15], {5, 15}, upto=15) == "6-10"
    assert lost_steps(None, [5, 10, 15], {5, 10}, upto=10) == ""
    assert lost_steps(12, [5, 10, 15], {15}, upto=15) == ""  # the compacted file holds 0-12
    assert lost_steps(None, [2, 4], {4}, upto=4) == "0-2"
    assert lost_steps(None, [], set(), upto=0) == "0"


def test_corrupt_compacted_file_is_set_aside_and_the_parts_recover_everything(tmp_path):
    parts_at(tmp_path, 5, 10)
    write_parquet_atomic(tmp_path / "metrics.parquet", read_table(tmp_path, "metrics"))
    damage(tmp_path / "metrics.parquet", "junk")  # a crash between compaction and cleanup
    lines: list[str] = []
    Records(tmp_path, "r", log=lines.append).truncate(10)
    assert len(lines) == 1 and str(tmp_path / "metrics.parquet") in lines[0]  # nothing lost
    assert [p.name.split(SET_ASIDE_MARK)[0] for p in set_aside_files(tmp_path)] == ["metrics.parquet"]
    assert read_table(tmp_path, "metrics")["step"].to_list() == list(range(1, 11))


def test_corrupt_part_loses_its_steps_says_so_and_compaction_keeps_it(tmp_path):
    parts_at(tmp_path, 5, 10, 15)
    damage(tmp_path / "metrics" / "part-000000010.parquet", "truncated")
    lines: list[str] = []
    resumed = Records(tmp_path, "r", log=lines.append)
    resumed.truncate(15)
    assert len(lines) == 2
    assert "part-000000010.parquet: corrupt record file (truncated" in lines[0]
    assert lines[1] == ("metrics: the rows of steps 6-10 were only in the corrupt file(s): "
                        "they stay missing (not re-created)")
    assert read_table(tmp_path, "metrics")["step"].to_list() == [*range(1, 6), *range(11, 16)]
    log_rows(resumed, range(16, 18))
    resumed.flush(17)
    resumed.compact()
    steps = pl.read_parquet(tmp_path / "metrics.parquet")["step"].to_list()
    assert steps == [*range(1, 6), *range(11, 18)]
    assert [p.parent.name for p in set_aside_files(tmp_path)] == ["metrics"]  # kept, with its folder
    assert not list((tmp_path / "metrics").glob("part-*.parquet"))


def test_a_corrupt_file_beyond_the_checkpoint_loses_nothing(tmp_path):
    parts_at(tmp_path, 5, 10)
    damage(tmp_path / "metrics" / "part-000000010.parquet", "junk")
    lines: list[str] = []
    Records(tmp_path, "r", log=lines.append).truncate(5)  # its rows were to be dropped anyway
    assert len(lines) == 1
    assert read_table(tmp_path, "metrics")["step"].to_list() == [1, 2, 3, 4, 5]


# ------------------------------------------------------------------ through the real CLI
STEPS = 12


@pytest.fixture(scope="module")
def preempted(tmp_path_factory):
    """A run stopped by SIGUSR1 at step 6 (checkpoints and parts every 2 steps), a config
    file for it, and a pristine copy of its directory to damage."""
    root = tmp_path_factory.mktemp("corrupt")
    data = make_token_dir(root / "tokens")
    cfg = tiny_cfg(data, STEPS, "train.checkpoint_every=2", "train.eval_every=2",
                   "train.norms_every=2")
    run_dir = root / "pristine"
    real = step_mod.lm_loss
    step_mod.lm_loss = signal_at_step(6, signal.SIGUSR1)
    try:
        assert train(cfg, run_dir) == State.PREEMPTED
    finally:
        step_mod.lm_loss = real
    assert sorted(p.name for p in (run_dir / "metrics").iterdir()) == [
        f"part-{s:09d}.parquet" for s in (2, 4, 6)]
    return write_cfg_yaml(root / "cfg.yaml", cfg), run_dir


def _relaunch(cfg_yaml: Path, run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scalelab", "train", str(cfg_yaml), "--run-dir", str(run_dir)],
        env=cli_env(), capture_output=True, text=True, timeout=CEILING_S, check=False,
    )


@pytest.mark.parametrize("which,how,lost", [
    ("metrics.parquet", "junk", None),  # parts hold every row: nothing lost
    ("metrics/part-000000004.parquet", "truncated", "metrics: the rows of steps 3-4"),
    ("evals/part-000000002.parquet", "junk", "evals: the rows of steps 0-2"),
])
def test_relaunch_sets_the_file_aside_and_resumes(preempted, tmp_path, which, how, lost):
    cfg_yaml, pristine = preempted
    run_dir = tmp_path / "run"
    subprocess.run(["cp", "-r", str(pristine), str(run_dir)], check=True)
    target = run_dir / which
    if which == "metrics.parquet":  # as if compacted, then damaged, before the parts went
        write_parquet_atomic(target, read_table(run_dir, "metrics"))
    damage(target, how)
    damaged = target.read_bytes()

    proc = _relaunch(cfg_yaml, run_dir)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    named = [line for line in out.splitlines() if str(target) in line]
    assert len(named) == 1 and "corrupt record file" in named[0], out
    losses = [line for line in out.splitlines() if "stay missing" in line]
    assert [lost in line for line in losses] == ([True] if lost else []), out
    (aside,) = set_aside_files(run_dir)  # moved aside, never deleted
    assert aside.parent == target.parent and aside.name.startswith(target.name + SET_ASIDE_MARK)
    assert aside.read_bytes() == damaged
    assert read_status(run_dir)["state"] == "COMPLETED"
    metrics = pl.read_parquet(run_dir / "metrics.parquet")["step"]
    assert metrics.is_unique().all() and metrics.to_list()[-1] == STEPS  # each step at most once
    if which.startswith("metrics/"):
        assert metrics.to_list() == [1, 2, *range(5, STEPS + 1)]  # not re-created
    assert pl.read_parquet(run_dir / "evals.parquet")["step"].is_unique().all()


# ------------------------------------------------------------------ status and collect
def make_sweep(root: Path) -> Path:
    """Four finished or stopped runs: clean; junk compacted evals (COMPLETED); a truncated
    eval part beside a readable one (PREEMPTED); one whose evals.parquet decodes badly
    although both its ends are intact (COMPLETED)."""
    names = ["clean", "junk", "truncated", "pages"]
    rows = [{"run_id": f"id{i}", "name": n, "run_dir": f"runs/{n}-id{i}", "optim.lr": 1e-3 * (i + 1),
             "member": 0, "N": 1000, "N_non_embedding": 500, "D_unique": 100, "D_total": 100,
             "epochs": 1.0, "steps": 20, "flops": 6e5, "gpu_hours": None}
            for i, n in enumerate(names)]
    write_parquet_atomic(root / "plan.parquet", pl.DataFrame(rows))

    def evals(steps, losses):
        return pl.DataFrame({"run_id": ["x"] * len(steps), "step": steps, "tokens": [0] * len(steps),
                             "split": ["val"] * len(steps), "loss": losses})

    dirs = [root / r["run_dir"] for r in rows]
    for d, state in zip(dirs, ["COMPLETED", "COMPLETED", "PREEMPTED", "COMPLETED"]):
        d.mkdir(parents=True)
        update_status(d, State(state), steps_done=20)
    write_parquet_atomic(dirs[0] / "evals.parquet", evals([0, 20], [5.0, 3.0]))
    write_parquet_atomic(dirs[1] / "evals.parquet", evals([0, 20], [5.0, 3.0]))
    damage(dirs[1] / "evals.parquet", "junk")
    write_parquet_atomic(dirs[2] / "evals" / "part-000000010.parquet", evals([0, 10], [5.0, 4.0]))
    write_parquet_atomic(dirs[2] / "evals" / "part-000000020.parquet", evals([20], [3.5]))
    damage(dirs[2] / "evals" / "part-000000020.parquet", "truncated")
    big = evals(list(range(400)), [float(i) for i in range(400)])
    write_parquet_atomic(dirs[3] / "evals.parquet", big)
    data = bytearray((dirs[3] / "evals.parquet").read_bytes())
    data[100:500] = bytes(400)
    (dirs[3] / "evals.parquet").write_bytes(bytes(data))
    return root


def test_collect_notes_corrupt_files_and_uses_the_rest(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "sw")
    assert cli("collect", str(sweep)) == 0
    assert "Traceback" not in capsys.readouterr().err
    frame = collect(sweep).sort("run_id")
    notes = frame["records_note"].to_list()
    assert notes[0] is None
    assert notes[1].startswith("CORRUPT evals.parquet (not parquet")
    assert notes[2].startswith("CORRUPT evals/part-000000020.parquet (truncated")
    assert notes[3].startswith("CORRUPT evals.parquet (")  # found when the one scan failed
    assert frame["final_loss"].to_list() == [3.0, None, 4.0, None]  # readable files only
    assert frame["best_loss"].to_list() == [3.0, None, 4.0, None]
    assert pl.read_parquet(sweep / "runs.parquet")["records_note"].to_list() == notes


def test_status_marks_the_runs_and_names_the_files(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "sw")
    frame = sweep_states(sweep).sort("run_id")
    assert [n is not None for n in frame["records_note"]] == [False, True, True, False]  # quick check
    assert cli("status", str(sweep)) == 0
    out = capsys.readouterr().out
    assert "2 with corrupt record files" in out
    assert "! runs/junk-id1: CORRUPT evals.parquet (not parquet: no PAR1 header)" in out
    assert "! runs/truncated-id2: CORRUPT evals/part-000000020.parquet (truncated" in out


def test_status_and_collect_remember_a_file_set_aside(tmp_path):
    sweep = make_sweep(tmp_path / "sw")
    run = sweep / "runs/clean-id0"
    (run / "metrics.parquet.corrupt-20250101T000000Z").write_bytes(b"junk")
    note = "set aside after corruption: metrics.parquet.corrupt-20250101T000000Z"
    assert sweep_states(sweep).sort("run_id")["records_note"][0] == note
    assert collect(sweep).sort("run_id")["records_note"][0] == note
