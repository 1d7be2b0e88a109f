"""Loading trained runs back from their run directories.

A run directory holds ``config.yaml`` (the resolved RunConfig plus derived quantities)
and ``checkpoint/step-*/state.pt`` (``scalelab.train.checkpoint.directory``); the newest checkpoint
of a COMPLETED run holds its final weights. Used by ensemble evaluation and by teacher
generation / logit KD. The checkpoint is verified against its manifest and unpickled with
``weights_only=True``: a corrupt one, or one whose pickle would run code, is a one-line
``UserError`` naming it (exit 2), never an older checkpoint in its place.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from scalelab.config import RunConfig, device_problem, load_run_config
from scalelab.errors import UserError
from scalelab.store.layout import CHECKPOINT_FOLDER, CONFIG_FILE
from scalelab.store.status import State, read_status

__all__ = ["TrainedRun", "load_trained", "model_digest", "pick_device", "read_config"]


@dataclass(frozen=True)
class TrainedRun:
    """A trained model with its run directory, config and the step of its weights."""

    run_dir: Path
    cfg: RunConfig
    model: torch.nn.Module
    step: int
    digest: str
    """sha256 over the model's parameter names, dtypes, shapes and bytes."""


def pick_device(device: str = "auto", *, key: str = "train.device") -> torch.device:
    """'auto' -> cuda when present, else cpu; 'cpu', 'cuda', 'cuda:N' as named. Anything
    else (``config.device_problem``, the trainer's rule), CUDA where there is none, or a GPU
    index past the node's is a one-line UserError about ``key``."""
    if problem := device_problem(device):
        raise UserError(problem, key=key)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device != "cpu":
        if not torch.cuda.is_available():
            raise UserError(f"device {device!r} requested but CUDA is not available", key=key)
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise UserError(f"device {device!r}: this node has {torch.cuda.device_count()} GPU(s)",
                            key=key)
    return torch.device(device)


def read_config(run_dir: str | Path) -> RunConfig:
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise UserError("no config.yaml: not a run directory", file=str(run_dir))
    return load_run_config(path)


def _strip_prefixes(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop wrapper prefixes (torch.compile '_orig_mod.', DDP 'module.')."""
    out = {}
    for key, value in state.items():
        for prefix in ("_orig_mod.", "module."):
            while key.startswith(prefix):
                key = key[len(prefix):]
        out[key] = value
    return out


def model_digest(state: dict[str, torch.Tensor]) -> str:
    """Content hash of a model state dict: names, dtypes, shapes, bytes, in sorted order."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def load_trained(run_dir: str | Path, device: str | torch.device = "cpu", *,
                 require_completed: bool = True) -> TrainedRun:
    """The final model of a run, in eval mode, in fp32, on ``device``; a run trained with
    quantized GEMMs (``train.precision`` fp8, mxfp8, mxfp4, nvfp4) keeps them (its forward
    rounds to nearest: no random bits)."""
    from scalelab.model import build_model
    from scalelab.quant import QUANT_PRECISIONS, quantize_linears
    from scalelab.train.checkpoint.directory import load_final

    run_dir = Path(run_dir)
    cfg = read_config(run_dir)
    if require_completed:
        status = read_status(run_dir) or {}
        if status.get("state") != State.COMPLETED.value:
            raise UserError(
                f"run is {status.get('state', 'not started')}, not COMPLETED", file=str(run_dir)
            )
    found = load_final(run_dir, map_location="cpu")
    if found is None:
        raise UserError("no checkpoint to load", file=str(run_dir / CHECKPOINT_FOLDER))
    step, state = found
    weights = _strip_prefixes(state["model"] if "model" in state else state)
    vocab = int(weights["tok_emb.weight"].shape[0]) - int(cfg.model.objective == "mdm")  # [MASK] row
    model = build_model(cfg.model, vocab_size=vocab)
    model.load_state_dict({k: v.float() for k, v in weights.items()})
    if cfg.train.precision in QUANT_PRECISIONS:  # score it with the GEMMs it trained with
        quantize_linears(model, cfg.train.precision)
    model.to(pick_device(str(device)) if isinstance(device, str) else device).eval()
    return TrainedRun(run_dir, cfg, model, step, model_digest(weights))
