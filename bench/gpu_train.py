"""Train a preset for a few steps with ``scalelab.train.train`` and measure it (bench/gpu.py).

The recipe is ``sweeps/200M_tokens.yaml``'s ``base`` (seq 4096, vocab 128,256, batch 64,
bf16-autocast, AdamW, ``micro_batch_size: auto``, compile) with the bench's overrides:
the preset, ``train.parallelism: fsdp``, ``steps`` steps of synthetic tokens (``synthetic_data``:
uniform random ids, since the embedded corpus is byte-level, vocab 256), evals only at
step 0 and the end on one validation window, no norm records, one checkpoint (the final
one, which ``train`` always writes).

Launch (``launch``): one process on one visible GPU (or on the CPU smoke), else
``torchrun --standalone --nproc_per_node=<GPUs>``. Each rank (``main``, this file as a
script) runs ``train`` and writes ``rank<r>.json``:

- step times from a global optimizer-step post-hook (``torch.optim.optimizer.
  register_optimizer_step_post_hook``) that synchronises the device and reads the clock
  after step 1, after the last warm-up step and after the last step;
- ``first_step_s``: from the ``train()`` call to the end of step 1 (run setup, dataset,
  model build, FSDP sharding, compile of the first step, the step-0 eval);
- ``peak_alloc_gib``: ``torch.cuda.max_memory_allocated`` over the whole run, and the memory
  model's prediction for the same setup: ``scalelab.model.micro_batch.micro_batch`` (what
  the trainer itself asks ``scalelab.model.memory.estimate`` for). The prediction includes
  ``RUNTIME_GIB`` (CUDA context, NCCL buffers) that the allocator does not see;
  ``ratio_alloc_to_predicted`` compares against the prediction without it.

``summarize`` turns the rank files into one row: tokens/s over the steps after warm-up,
MFU = tokens/s per GPU x ``flops_per_token`` (``scalelab.model.counts``, PaLM App. B) / peak.
"""

from __future__ import annotations

import time

T_IMPORT = time.perf_counter()  # before torch and scalelab: the imports count in one figure

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "sweeps" / "200M_tokens.yaml"

__all__ = ["RECIPE", "TrainSpec", "launch", "launch_command", "run_config", "summarize",
           "synthetic_data"]


@dataclass(frozen=True)
class TrainSpec:
    """One bench run; JSON round-trips to the rank processes."""

    preset: str
    dataset: str
    out_dir: str
    steps: int = 50
    warmup_steps: int = 10
    batch_size: int | None = None  # None: the recipe's (64)
    seq_len: int | None = None  # None: the recipe's (4096)
    vocab_size: int | None = None  # None: the recipe's (128,256)
    compile: bool = True
    device: str = "cuda"
    precision: str | None = None  # None: the recipe's (bf16-autocast)


def run_config(spec: TrainSpec):
    """The recipe's base config with the bench's overrides (a ``RunConfig``)."""
    import yaml

    from scalelab import strict
    from scalelab.config import load_run_config
    from scalelab.sweep.spec.load import load_spec

    base = strict.to_dict(load_spec(RECIPE).base)
    seq = spec.seq_len or base["data"]["seq_len"]
    batch = spec.batch_size or base["train"]["batch_size"]
    overrides = [
        f"model.preset={spec.preset}", f"data.dataset={spec.dataset}", f"data.seq_len={seq}",
        f"data.unique_tokens={spec.steps * batch * seq}", "data.epochs=1",
        f"data.val_tokens={seq + 1}", f"train.batch_size={batch}",
        "train.parallelism=fsdp", f"train.compile={str(spec.compile).lower()}",
        "train.eval_every=0", "train.eval_batches=1", "train.norms_every=0", "train.log_every=1",
        f"train.checkpoint_every={10**9}", f"train.device={spec.device}",
    ]
    if spec.vocab_size is not None:
        overrides.append(f"data.vocab_size={spec.vocab_size}")
    if spec.precision is not None:
        overrides.append(f"train.precision={spec.precision}")
    path = Path(spec.out_dir) / "recipe_base.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return load_run_config(path, overrides)


def synthetic_data(path: Path, *, vocab: int, steps: int, batch: int, seq: int) -> Path:
    """Uniform random token ids, enough for ``steps`` batches and one validation window."""
    import numpy as np

    from scalelab.data import write_token_dir

    n = (steps * batch + 2) * (seq + 1) + 2 * (seq + 1)
    tokens = np.random.default_rng(0).integers(0, vocab, size=n, dtype=np.int64)
    return write_token_dir(path, tokens, vocab_size=vocab, tokenizer_id="synthetic-uniform",
                           eos_id=None, n_documents=1, sources=["synthetic-uniform"])


def launch_command(spec: TrainSpec, nproc: int) -> list[str]:
    """One process for ``nproc`` <= 1, else torchrun with one process per GPU."""
    script = [str(Path(__file__).resolve()), json.dumps(asdict(spec))]
    if nproc <= 1:
        return [sys.executable, *script]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", *script]


def launch(spec: TrainSpec, nproc: int, timeout_s: float | None = None) -> dict[str, Any]:
    """Run the bench for ``spec`` in fresh processes; the summary row (with 'error' on failure)."""
    cmd = launch_command(spec, nproc)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=timeout_s, check=False)
    row = summarize(spec, nproc)
    if proc.returncode != 0 or row.get("state") != "COMPLETED":
        row["error"] = (f"rc {proc.returncode}: " + proc.stderr.strip()[-1500:]).strip()
    return row


def summarize(spec: TrainSpec, nproc: int) -> dict[str, Any]:
    """One result row from the ranks' files (rank 0's clock; memory: the largest rank's)."""
    from gpu_report import peak_tflops  # bench/ is on sys.path (script dir or PYTHONPATH)

    from scalelab.model.counts import flops_per_token
    from scalelab.model.memory import RUNTIME_GIB
    from scalelab.model.presets import resolve_shape

    files = sorted(Path(spec.out_dir).glob("rank*.json"))
    ranks = [json.loads(f.read_text()) for f in files]
    row: dict[str, Any] = {"preset": spec.preset, "world_size": max(nproc, 1), "steps": spec.steps}
    if not ranks:
        return {**row, "state": "no result"}
    r0 = next((r for r in ranks if r["rank"] == 0), ranks[0])
    cfg = run_config(spec)
    shape = resolve_shape(cfg.model)
    vocab, seq = cfg.data.vocab_size, cfg.data.seq_len
    fpt = flops_per_token(shape, vocab, seq)
    timed_steps = spec.steps - spec.warmup_steps
    t = r0["step_clock"]
    tps = None
    if timed_steps > 0 and str(spec.steps) in t and str(spec.warmup_steps) in t:
        seconds = t[str(spec.steps)] - t[str(spec.warmup_steps)]
        tps = timed_steps * cfg.train.batch_size * seq / seconds
    peak = peak_tflops(r0["device_name"]) if spec.device == "cuda" else None
    alloc = [r["peak_alloc_gib"] for r in ranks if r["peak_alloc_gib"] is not None]
    predicted = r0["predicted_gib"]
    alloc_max = max(alloc) if alloc else None
    return {
        **row, "state": r0["state"], "micro_batch": r0["micro_batch"], "device": r0["device_name"],
        "tokens_per_step": cfg.train.batch_size * seq, "flops_per_token": fpt,
        "tokens_per_s": tps, "timed_steps": timed_steps,
        "mfu": tps * fpt / row["world_size"] / (peak * 1e12) if tps and peak else None,
        "first_step_s": r0["first_step_s"],
        "first_step_with_imports_s": r0["first_step_with_imports_s"],
        "peak_alloc_gib": alloc_max,
        "peak_reserved_gib": max((r["peak_reserved_gib"] or 0) for r in ranks) or None,
        "predicted_gib": predicted, "predicted_terms_gib": r0["predicted_terms_gib"],
        "ratio_alloc_to_predicted": (alloc_max / (predicted - RUNTIME_GIB)
                                     if alloc_max is not None else None),
    }


def _step_clock(device, marks: set[int]):
    """A global optimizer-step post-hook recording the (synchronised) clock at ``marks``."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    clock: dict[str, float] = {}
    count = [0]

    def hook(optimizer, args, kwargs) -> None:
        count[0] += 1
        if count[0] in marks:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            clock[str(count[0])] = time.perf_counter()

    handle = register_optimizer_step_post_hook(hook)
    return clock, handle


def main(spec: TrainSpec) -> None:
    """One rank: train, then write ``rank<r>.json`` into ``spec.out_dir``."""
    import torch

    from scalelab.model.micro_batch import device_memory_gib, micro_batch
    from scalelab.train import train

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if spec.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats(device)
    cfg = run_config(spec)
    micro = micro_batch(cfg, cfg.data.vocab_size, world, device_memory_gib(device))
    clock, handle = _step_clock(device, {1, spec.warmup_steps, spec.steps})
    t0 = time.perf_counter()
    try:
        state = train(cfg, Path(spec.out_dir) / "run")
    finally:
        handle.remove()
    cuda = device.type == "cuda"
    result = {
        "rank": rank, "world_size": world, "state": state.value,
        "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "micro_batch": micro.size, "step_clock": {k: v - t0 for k, v in clock.items()},
        "first_step_s": clock["1"] - t0 if "1" in clock else None,
        "first_step_with_imports_s": clock["1"] - T_IMPORT if "1" in clock else None,
        "peak_alloc_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None,
        "peak_reserved_gib": torch.cuda.max_memory_reserved(device) / 2**30 if cuda else None,
        "predicted_gib": micro.estimate.peak_gib, "predicted_terms_gib": micro.estimate.gib(),
    }
    (Path(spec.out_dir) / f"rank{rank}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", help="a TrainSpec as JSON")
    main(TrainSpec(**json.loads(ap.parse_args().spec)))
