"""A corrupt ``status.json`` or ``claim.json`` through the real CLI: never a traceback.

- ``claim.json`` that cannot be parsed holds nothing: ``sweep`` and ``retry`` take the run
  over, set the file aside and say so in one line naming it (a relaunch used to skip the
  run forever as "claimed by a concurrent launch").
- ``status.json`` that holds no run status: ``status``, ``collect`` and ``sweep`` count the
  run FAILED and name the file; ``retry --failed`` sets it aside and reruns the run;
  ``train`` on the run directory is one line naming it, exit 2.

Each case is one of: binary bytes, truncated JSON, a JSON list, wrong types, an unknown
state (status), an empty file (claim), a directory in place of the file, a symlink to
``/dev/zero``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from _waits import CEILING_S

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lifecycle_helpers import FAKE, PYTHON, REPO, TINY_BASE, cli, fake_env, write_spec
from test_bad_input import assert_one_line

from scalelab.store.status import State, read_status, update_status
from scalelab.sweep.run.lock import UnreadableClaim, is_live, read_claim, release, try_claim


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("kept")


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


COMMON = {
    "binary": lambda p: p.write_bytes(bytes(range(256)) * 8),
    "truncated": lambda p: p.write_text('{"state": "COMPLETED", "attempts": 1, "job'),
    "json-list": lambda p: p.write_text('["COMPLETED", 1]'),
    "directory": _directory,
    "dev-zero": _dev_zero,
}
STATUS_CASES = {
    **COMMON,
    "bogus-state": lambda p: p.write_text('{"state": "BOGUS", "attempts": 1}'),
    "wrong-types": lambda p: p.write_text('{"state": "COMPLETED", "attempts": "x", "steps_done": "7"}'),
}
_CLAIM = {"token": "t", "host": "h", "pid": 1, "backend": "local"}
CLAIM_CASES = {
    **COMMON,
    "pid-string": lambda p: p.write_text(json.dumps({**_CLAIM, "pid": "x"})),
    "token-number": lambda p: p.write_text(json.dumps({**_CLAIM, "token": 5})),
    "job-id-number": lambda p: p.write_text(json.dumps({**_CLAIM, "job_id": 7})),
    "empty": lambda p: p.write_text(""),
}


def _swept(tmp_path: Path, n: int) -> tuple[Path, Path, list[Path]]:
    """A spec of ``n`` fake runs, swept (all COMPLETED): spec, sweep directory, runs."""
    base = {"model": {"preset": "cpu-50k"}, "data": {"vocab_size": 256, "unique_tokens": 1024, "seq_len": 16},
            "extra": {"fake_steps": 2}}
    spec = write_spec(tmp_path / "bad.yaml", "bad", base=base,
                      grid={"optim.lr": [round(1e-3 * (i + 1), 6) for i in range(n)]})
    root = tmp_path / "root"
    assert cli("sweep", str(spec), "--root", str(root), "--executor", "debug", "--train-target", FAKE) == 0
    sweep = root / "bad"
    return spec, sweep, [sweep / d for d in pl.read_parquet(sweep / "plan.parquet")["run_dir"]]


def _scalelab(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**fake_env(), "SCALELAB_ROOT": str(tmp_path / "root")}
    proc = subprocess.run([PYTHON, "-m", "scalelab", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=CEILING_S, check=False)
    assert proc.returncode in (0, 2), (args, proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, (args, proc.stderr)
    return proc


def _lines_naming(text: str, path: Path) -> list[str]:
    return [line for line in text.splitlines() if f"{path}:" in line]


def test_corrupt_status_is_failed_for_the_sweep_and_set_aside_by_retry(tmp_path, capsys):
    spec, sweep, runs = _swept(tmp_path, len(STATUS_CASES))
    capsys.readouterr()
    files = [run / "status.json" for run in runs]
    for make, path in zip(STATUS_CASES.values(), files):
        path.unlink()
        make(path)
    for args in (("status", sweep), ("collect", sweep),
                 ("sweep", spec, "--executor", "debug", "--train-target", FAKE)):
        proc = _scalelab(tmp_path, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        for path in files:  # one line on stderr names each corrupt file
            assert len(_lines_naming(proc.stderr, path)) == 1, (args, path, proc.stderr)
    assert "0 launched" in proc.stdout and "retry --failed" in proc.stdout
    runs_frame = pl.read_parquet(sweep / "runs.parquet")
    assert runs_frame["state"].to_list() == ["FAILED"] * len(runs)
    proc = _scalelab(tmp_path, "retry", sweep, "--failed", "--executor", "debug", "--train-target", FAKE)
    assert proc.returncode == 0 and f"{len(runs)} launched on debug" in proc.stdout, proc.stdout
    for run, path in zip(runs, files):
        assert any("set aside as status.json.corrupt-" in line for line in _lines_naming(proc.stderr, path))
        assert read_status(run)["state"] == "COMPLETED"
        assert len(list(run.glob("status.json.corrupt-*"))) == 1  # never deleted
    assert _scalelab(tmp_path, "status", sweep).stderr == ""


@pytest.mark.parametrize("case", list(STATUS_CASES))
def test_train_on_a_run_with_a_corrupt_status_is_one_line(tmp_path, case):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(TINY_BASE))
    run = tmp_path / "run"
    run.mkdir()
    STATUS_CASES[case](run / "status.json")
    env = {**fake_env(), "SCALELAB_ROOT": str(tmp_path / "root")}
    proc = subprocess.run([PYTHON, "-m", "scalelab", "train", str(config), "--run-dir", str(run)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=CEILING_S, check=False)
    assert_one_line(proc, f"{run / 'status.json'}: corrupt run status")


@pytest.mark.parametrize("relaunch", ["sweep", "retry"])
def test_unreadable_claim_on_a_preempted_run_is_stale_and_taken_over(tmp_path, capsys, relaunch):
    spec, sweep, runs = _swept(tmp_path, len(CLAIM_CASES))
    capsys.readouterr()
    claims = [run / "claim.json" for run in runs]
    for make, run, path in zip(CLAIM_CASES.values(), runs, claims):
        (run / "status.json").unlink()  # planted: a COMPLETED run never moves back
        update_status(run, State.PREEMPTED)
        make(path)
    for args in (("status", sweep), ("collect", sweep)):
        assert _scalelab(tmp_path, *args).returncode == 0
    assert pl.read_parquet(sweep / "runs.parquet")["state"].to_list() == ["PREEMPTED"] * len(runs)
    args = (("sweep", spec) if relaunch == "sweep" else ("retry", sweep, "--preempted"))
    proc = _scalelab(tmp_path, *args, "--executor", "debug", "--train-target", FAKE)
    assert proc.returncode == 0 and f"{len(runs)} launched on debug" in proc.stdout, proc.stdout
    for run, path in zip(runs, claims):
        said = _lines_naming(proc.stderr, path)
        assert len(said) == 1 and "unreadable claim" in said[0] and "taking the run over" in said[0]
        assert read_status(run)["state"] == "COMPLETED" and not path.exists()
        assert len(list(run.glob("claim.json.corrupt-*"))) == 1  # set aside, never deleted
    aside = next(runs[list(CLAIM_CASES).index("directory")].glob("claim.json.corrupt-*"))
    assert (aside / "inside").read_text() == "kept"


def test_an_unreadable_claim_is_broken_only_while_it_is_the_one_judged(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    path = run / "claim.json"
    path.write_text("{not json")
    judged = read_claim(run)
    assert isinstance(judged, UnreadableClaim) and not is_live(judged)
    path.unlink()  # meanwhile a concurrent launch broke it and claimed the run
    fresh = try_claim(run, backend="local")
    release(run, judged)  # a late breaker acting on its old judgement
    assert read_claim(run) == fresh
    release(run, fresh)
    path.write_text("{not json")
    judged = read_claim(run)
    path.write_text("{other junk")  # rewritten since it was judged: judge it again first
    release(run, judged)
    assert path.read_text() == "{other junk"
    assert try_claim(run, backend="local") is not None  # a fresh judgement takes it over
