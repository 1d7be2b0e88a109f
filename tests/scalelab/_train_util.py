"""Shared helpers of the train-loop tests: a tiny token directory and tiny run configs."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from _waits import CEILING_S

from scalelab.config import RunConfig, load_run_config
from scalelab.data import write_token_dir

REPO = Path(__file__).resolve().parents[2]


_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "model loss data token train step scale law compute epoch weight decay rate batch layer norm "
    "def return self import class for while yield lambda none true false value key list dict"
).split()


def make_token_dir(path: Path, n_bytes: int = 300_000) -> Path:
    """``n_bytes`` byte tokens of word-like text, the same on every machine and checkout.

    Zipf-distributed words from a fixed list, in lines of 4-16 words, drawn by numpy's
    legacy ``RandomState(0)`` (its stream is frozen across numpy releases). Tests that
    compare two runs at a fixed tolerance must not train on files that change with the code.
    """
    rng = np.random.RandomState(0)
    ranks = np.arange(1, len(_WORDS) + 1, dtype=np.float64)
    p = (1.0 / ranks) / (1.0 / ranks).sum()
    lines, size = [], 0
    while size < n_bytes:
        words = rng.choice(len(_WORDS), size=rng.randint(4, 17), p=p)
        line = " ".join(_WORDS[w] for w in words) + "\n"
        lines.append(line)
        size += len(line)
    data = "".join(lines).encode()[:n_bytes]
    tokens = np.frombuffer(data, dtype=np.uint8).astype(np.uint16)
    return write_token_dir(
        path, tokens, vocab_size=256, tokenizer_id="bytes-v1", eos_id=None,
        n_documents=len(lines), sources=["synthetic-words"],
    )


def tiny_overrides(dataset: Path, steps: int, batch: int = 4, seq: int = 32) -> list[str]:
    """A cpu-50k run of exactly ``steps`` steps (U = steps batches, one epoch)."""
    return [
        "model.preset=cpu-50k",
        f"data.dataset={dataset}",
        f"data.seq_len={seq}",
        f"data.unique_tokens={steps * batch * seq}",
        "data.epochs=1",
        "data.val_tokens=4096",
        f"train.batch_size={batch}",
        "train.eval_batches=2",
        "train.warmup=2",
        "optim.lr=0.01",
    ]


def tiny_cfg(dataset: Path, steps: int, *extra: str, batch: int = 4) -> RunConfig:
    return load_run_config(None, tiny_overrides(dataset, steps, batch) + list(extra))


def write_cfg_yaml(path: Path, cfg: RunConfig) -> Path:
    import yaml

    from scalelab import strict

    path.write_text(yaml.safe_dump(strict.to_dict(cfg), sort_keys=False))
    return path


def cli_env() -> dict[str, str]:
    """Subprocess environment: one thread (bitwise comparable with the in-process runs)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        env.pop(key, None)
    return env


def popen_train(cfg_yaml: Path, run_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``scalelab train`` in a subprocess (``env``: extra variables, e.g. a test hook)."""
    return subprocess.Popen(
        [sys.executable, "-m", "scalelab", "train", str(cfg_yaml), "--run-dir", str(run_dir)],
        env={**cli_env(), **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


class CodeRunningPickle:
    """Unpickling it runs ``touch <marker>``: what loading a checkpoint must never do."""

    def __init__(self, marker: Path):
        self.marker = Path(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


def write_malicious_checkpoint(run_dir: Path, step: int, marker: Path) -> Path:
    """``run_dir/checkpoint/step-<step>/state.pt`` whose pickle calls ``os.system``, with a
    manifest that matches it (whoever can write the file can hash it): only the weights-only
    loader stands in the way. Returns the state.pt path."""
    from scalelab.train.checkpoint.manifest import file_digest, write_manifest

    directory = Path(run_dir) / "checkpoint" / f"step-{step:09d}"
    directory.mkdir(parents=True)
    torch.save({"step": step, "model": CodeRunningPickle(marker)}, directory / "state.pt")
    write_manifest(directory, step, {"state.pt": file_digest(directory / "state.pt")})
    return directory / "state.pt"


def final_state(run_dir: Path) -> dict:
    """The newest checkpoint's state dict."""
    from scalelab.train.checkpoint.directory import load_checkpoint

    state = load_checkpoint(run_dir)
    assert state is not None, f"no checkpoint in {run_dir}"
    return state


def assert_tensors_equal(a, b, path: str = "") -> None:
    """Bitwise equality of nested dicts/lists of tensors and plain values."""
    if torch.is_tensor(a):
        assert torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), f"tensors differ at {path}"
    elif isinstance(a, dict):
        assert set(a) == set(b), f"keys differ at {path}: {set(a) ^ set(b)}"
        for k in a:
            assert_tensors_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_tensors_equal(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(rank: int, world: int, port: int, overrides: list[str], run_dir: str) -> None:
    """Body of one torchrun-style rank (spawned): env as torchrun sets it, then train()."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from scalelab.train import train

    state = train(load_run_config(None, overrides), Path(run_dir))
    sys.exit(0 if state.value == "COMPLETED" else 1)


def spawn_ranks(world: int, target, args: tuple, timeout: float = CEILING_S) -> None:
    """Run ``target(rank, world, port, *args)`` in ``world`` spawned processes (one gloo rank
    each, a free port); asserts every rank exited 0, killing any still alive at ``timeout``."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, world, port, *args)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
    assert codes == [0] * world, f"rank exit codes {codes}"


def spawn_ddp(world: int, overrides: list[str], run_dir: Path, timeout: float = CEILING_S) -> None:
    spawn_ranks(world, ddp_worker, (overrides, str(run_dir)), timeout)


def signal_at_step(step: int, sig: int = signal.SIGTERM):
    """A stand-in for ``scalelab.train.step.lm_loss`` that sends this process ``sig`` during
    training step ``step`` (its ``step``-th forward with grad), as a cluster preempting the
    run would. Install it with ``monkeypatch.setattr(step_mod, "lm_loss", signal_at_step(k))``."""
    from scalelab.train import step as step_mod

    real, calls = step_mod.lm_loss, {"n": 0}

    def signalling(model, x, y):
        if torch.is_grad_enabled():
            calls["n"] += 1
            if calls["n"] == step:
                os.kill(os.getpid(), sig)
        return real(model, x, y)

    return signalling


def kill_9_and_resume(cfg: RunConfig, tmp_path: Path, at_least: int = 8) -> tuple[Path, Path]:
    """Train ``cfg`` uninterrupted in-process (``tmp_path/reference``), then in a subprocess
    killed with SIGKILL once a checkpoint at step >= ``at_least`` exists and relaunched to
    the end (``tmp_path/killed``). Asserts that it died mid-run and that the relaunch resumed
    from its newest checkpoint. Returns (reference, killed) run directories to compare."""
    from _waits import wait_until

    from scalelab.store.status import State, read_status
    from scalelab.train import train
    from scalelab.train.checkpoint import directory as ckpt

    ref, run_dir = tmp_path / "reference", tmp_path / "killed"
    assert train(cfg, ref) == State.COMPLETED
    cfg_yaml = write_cfg_yaml(tmp_path / "cfg.yaml", cfg)
    proc = popen_train(cfg_yaml, run_dir)

    def reached():
        step = ckpt.latest_step(run_dir)
        return step if step is not None and step >= at_least else None

    wait_until(reached, f"a checkpoint at step >= {at_least}", alive=lambda: proc.poll() is None,
               every=0.005)
    proc.kill()  # SIGKILL: no handler runs
    proc.wait()
    assert read_status(run_dir)["state"] == "RUNNING"  # it really died mid-run
    killed_at = ckpt.latest_step(run_dir)
    assert at_least <= killed_at < ckpt.load_checkpoint(ref)["step"]
    again = popen_train(cfg_yaml, run_dir)
    out, _ = again.communicate(timeout=CEILING_S)
    assert again.returncode == 0, out
    assert f"resumed from checkpoint at step {killed_at}" in out
    return ref, run_dir
