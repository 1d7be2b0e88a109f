"""FSDP2 for ``train.parallelism: fsdp``: shard the model, clip sharded gradients.

``shard_model`` applies ``torch.distributed.fsdp.fully_shard`` to every transformer block
(``model.layers[i]``), then to the root (embedding, final norm, head), on a 1-D mesh of
all ranks. Each parameter becomes a ``Shard(0)`` DTensor: rank ``r`` holds rows
``[r·c, (r+1)·c)`` with ``c = ceil(rows / W)`` (torch.chunk; a rank may hold none). A block's
parameters are all-gathered just before its forward and freed after it
(``reshard_after_forward``), again for its backward, and gradients are reduce-scattered
(averaged over ranks), so a rank holds 1/W of parameters, gradients and optimizer state
plus about one unsharded block.

``MixedPrecisionPolicy``: ``param_dtype`` from ``param_dtype_for`` (``train.fsdp_param_dtype``;
bf16 for 'bf16-autocast' by default), ``reduce_dtype`` fp32 always.

Gradient accumulation reduce-scatters after every micro-batch (FSDP2's default: an
unsharded gradient is never kept between micro-batches), so the gradient is the mean over
the global batch, as under DDP.

Why FSDP and one process differ (fp32): the gradient is summed in another order (per-rank
micro-batch means reduce-scattered vs one process accumulating all micro-batches), and the
gradient norm is a sum of per-shard sums of squares; the optimizers then see gradients
that differ in the last bits. Muon's and Scion's Newton-Schulz runs on the full matrix
(``optim.fsdp_matrix_apply`` gathers it on an owner rank), so there is no other difference.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import torch
from torch import nn

from optim.distributed import is_dtensor

__all__ = ["clip_grad_norm", "is_sharded", "load_full_state", "param_dtype_for", "shard_model"]


def is_sharded(model: nn.Module) -> bool:
    """True when ``model``'s parameters are DTensors (FSDP2 ``fully_shard`` applied)."""
    return any(is_dtensor(p) for p in model.parameters())


def param_dtype_for(setting: str, precision: str) -> torch.dtype | None:
    """MixedPrecisionPolicy.param_dtype for ``train.fsdp_param_dtype`` and ``train.precision``
    (None: compute in the stored dtype)."""
    if setting == "auto":
        return torch.bfloat16 if precision == "bf16-autocast" else None
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[setting]


def shard_model(model: nn.Module, device: torch.device, param_dtype: torch.dtype | None, *,
                compile_blocks: bool = False) -> nn.Module:
    """``fully_shard`` each block of ``model.layers``, then the root (in place; returns it).

    Call after the model is on ``device`` in its stored dtype (and after activation
    checkpointing is applied), before the optimizer is built. Needs the default process group.
    ``compile_blocks`` (``train.compile``): ``torch.compile`` each block in place first
    (``Module.compile``: names unchanged), TorchTitan's order, so FSDP2's all-gather hooks
    stay outside the compiled graphs; the blocks share one compiled graph.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for block in model.layers:
        if compile_blocks:
            block.compile()
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def clip_grad_norm(params: Iterable[torch.Tensor], max_norm: float) -> float:
    """``torch.nn.utils.clip_grad_norm_`` that also takes sharded (DTensor) gradients: the
    total 2-norm over all ranks' shards (a collective under FSDP), then every gradient is
    scaled by ``min(1, max_norm / (norm + 1e-6))``. Returns the norm before clipping.

    For plain tensors it is exactly ``clip_grad_norm_`` (the same two calls)."""
    params = list(params)
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads)
    if is_dtensor(total):
        total = total.full_tensor()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total.item()


def load_full_state(model: nn.Module, optimizer: torch.optim.Optimizer,
                    model_state: dict[str, torch.Tensor], optim_state: dict) -> None:
    """Load a replicated checkpoint's full ``model.state_dict()`` / ``optimizer.state_dict()``
    (every rank holds all of it) into a sharded ``model`` and its ``optimizer``: each rank
    keeps its own rows (``set_state_dict`` with ``full_state_dict=True``). The optimizer
    state is re-keyed from torch's positional ids to parameter names first, as
    ``set_state_dict`` wants it (the i-th saved param is the i-th param of the live groups).
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    names = {id(p): n for n, p in model.named_parameters()}
    saved = [i for g in optim_state["param_groups"] for i in g["params"]]
    live = [names[id(p)] for g in optimizer.param_groups for p in g["params"]]
    fqn = dict(zip(saved, live, strict=True))
    by_name = {
        "state": {fqn[i]: st for i, st in optim_state["state"].items()},
        "param_groups": [{**g, "params": [fqn[i] for i in g["params"]]}
                         for g in optim_state["param_groups"]],
    }
    get = getattr(optimizer, "settings", None)
    if callable(get) and "settings" in optim_state:  # set_state_dict drops the key: check it here
        from optim import check_saved_settings

        check_saved_settings(type(optimizer).__name__, optim_state, get())
    with warnings.catch_warnings():  # checked above (or saved before settings were recorded)
        warnings.filterwarnings("ignore", ".*the state_dict records no settings", UserWarning)
        set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=by_name,
                       options=StateDictOptions(full_state_dict=True))
