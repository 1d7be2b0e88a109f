"""A job trains only its own config: ``config-input.yaml`` must hash to the run's id.

A config rewritten between launch and job start (here: after a first launch, before the
relaunch's job starts) is refused in one line, the run is FAILED with that line in
status.json, and ``scalelab retry --failed`` rewrites the file from the spec and trains
the planned config.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import FAKE, cli, plan_of, write_spec

from scalelab import strict
from scalelab.config import load_run_config
from scalelab.identity import run_id
from scalelab.store.status import read_status
from scalelab.sweep.run.job import JobSpec, command, expected_id, main, run_in_process

_BASE = {"model": {"preset": "cpu-50k"},
         "data": {"seq_len": 16, "unique_tokens": 2048, "vocab_size": 256, "val_tokens": 4096},
         "train": {"batch_size": 4, "device": "cpu"}, "extra": {"fake_steps": 3}}


def _planted(tmp_path):
    """A one-run sweep planned from its spec, with the run's config-input.yaml rewritten
    to another lr; (sweep directory, planned config, run directory)."""
    spec = write_spec(tmp_path / "s.yaml", "ident", base=_BASE, grid={"optim.lr": [1e-3]},
                      launcher={"executor": "debug"})
    plan = plan_of(spec)
    cfg = plan.configs[0]
    sweep = tmp_path / "root" / "ident"
    run_dir = sweep / plan.table["run_dir"][0]
    run_dir.mkdir(parents=True)
    other = replace(cfg, optim=replace(cfg.optim, lr=5e-3))
    (run_dir / "config-input.yaml").write_text(yaml.safe_dump(strict.to_dict(other)))
    return spec, cfg, other, run_dir


def test_a_rewritten_config_input_is_refused_and_the_run_failed(tmp_path, capsys):
    _, cfg, other, run_dir = _planted(tmp_path)
    job = JobSpec(run_id(cfg), "r", str(run_dir), FAKE)
    assert run_in_process(job).value == "FAILED"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{run_dir / 'config-input.yaml'}: holds run {run_id(other)}")
    assert f"not this run {run_id(cfg)}" in err[0] and "scalelab retry --failed" in err[0]
    status = read_status(run_dir)
    assert status["state"] == "FAILED" and status["error"] == err[0]
    assert not (run_dir / "invocations.log").exists()  # the fake trainer never ran


def test_the_process_entry_point_checks_too(tmp_path, capsys):
    """``python -m scalelab.sweep.run.job`` (local backend): the id from --run-id, else the
    directory's name."""
    _, cfg, _, run_dir = _planted(tmp_path)
    argv = command(JobSpec(run_id(cfg), "r", str(run_dir), FAKE))
    assert argv[-2:] == ["--run-id", run_id(cfg)]
    assert main(argv[3:]) == 1
    assert read_status(run_dir)["state"] == "FAILED"
    assert expected_id(JobSpec("", "r", str(run_dir), FAKE)) == run_id(cfg)  # the name's id
    assert expected_id(JobSpec("gen", "g", str(tmp_path / "generate" / "abc"), FAKE)) is None


def test_retry_rewrites_config_input_from_the_spec_and_trains_the_planned_run(tmp_path, monkeypatch):
    spec, cfg, _, run_dir = _planted(tmp_path)
    monkeypatch.setenv("SCALELAB_ROOT", str(tmp_path / "root"))
    sweep = run_dir.parent.parent
    # the launch wrote config-input.yaml, then someone rewrote it before the job started
    from scalelab.sweep.run.launch import write_plan

    write_plan(plan_of(spec).table, sweep)
    (sweep / "spec.yaml").write_text(spec.read_text())
    job = JobSpec(run_id(cfg), "r", str(run_dir), FAKE)
    assert run_in_process(job).value == "FAILED"
    assert cli("status", str(sweep)) == 0
    assert cli("sweep", str(spec), "--train-target", FAKE) == 0  # a plain sweep leaves it FAILED
    assert read_status(run_dir)["state"] == "FAILED"
    assert cli("retry", str(sweep), "--failed", "--executor", "debug", "--train-target", FAKE) == 0
    status = read_status(run_dir)
    assert status["state"] == "COMPLETED" and status["attempts"] == 1
    assert run_id(load_run_config(run_dir / "config-input.yaml")) == run_id(cfg)
    assert (run_dir / "invocations.log").read_text().count("\n") == 1  # trained once, the planned run
