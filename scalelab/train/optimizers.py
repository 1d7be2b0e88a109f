"""Optimizers chosen by name (``optim.name``) through a registry.

A builder takes the *unwrapped* model (never the DDP wrapper, so parameter names are the
module's own: ``tok_emb.weight``, ``layers.0.attn.wq.weight``, ``lm_head.weight``) and the
``OptimConfig``, and returns a ``torch.optim.Optimizer``. The loop scales every param
group's ``lr`` by the schedule multiplier each step, from the group's ``base_lr`` (set
here to the group's peak lr when the builder did not).

Weight decay: following Kim et al. 2025 ("decay all matrices"), every parameter with
``ndim >= 2`` (embedding, head and hidden matrices) is decayed; 1-D parameters (RMSNorm
gains) are not. Decay is decoupled and multiplied by the current lr (torch convention).

Registered here: 'adamw' (torch), 'sr-adamw' (``optim.AdamW``, stochastic rounding of
bf16 params), 'muon' (``optim.Muon`` hybrid: Muon on hidden matrices, AdamW with
``aux_lr`` on embedding, head and gains), 'scion' (``optim.Scion`` with
``scion_param_groups``: ColNorm/Spectral/Sign radii ``scion_radii``; Scion has no weight
decay, ``optim.weight_decay`` is unused; the loop calls ``Scion.init`` with the run's
init seed, the norm-matched init of Pethick et al. 2025). Optimizers from ``optim`` use
stochastic rounding when the parameters are bf16 (``train.precision: bf16-pure``), unless
``optim.stochastic_rounding`` is False (round-to-nearest, the ablation).

Add an optimizer with::

    @register("my-opt")
    def _build(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer: ...
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

from scalelab.config import OptimConfig
from scalelab.errors import UserError, did_you_mean
from scalelab.train.parallel.fsdp import is_sharded

__all__ = ["REGISTRY", "build_optimizer", "decay_groups", "register"]

Builder = Callable[[nn.Module, OptimConfig], torch.optim.Optimizer]
REGISTRY: dict[str, Builder] = {}


def register(name: str) -> Callable[[Builder], Builder]:
    """Decorator: register ``builder`` under ``name`` (names are unique)."""

    def deco(builder: Builder) -> Builder:
        if name in REGISTRY:
            raise ValueError(f"optimizer {name!r} is already registered")
        REGISTRY[name] = builder
        return builder

    return deco


def build_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """The optimizer ``cfg.name`` for ``model``; each group gets ``base_lr`` (its peak lr)."""
    if cfg.name not in REGISTRY:
        raise UserError(
            f"unknown optimizer {cfg.name!r}{did_you_mean(cfg.name, REGISTRY)}; "
            f"registered: {', '.join(sorted(REGISTRY))}",
            key="optim.name",
        )
    opt = REGISTRY[cfg.name](model, cfg)
    for group in opt.param_groups:
        group.setdefault("base_lr", float(group["lr"]))  # a number (optim holds lr as a 0-d tensor)
    return opt


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: matrices (ndim >= 2) decayed, vectors/scalars not."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


@register("adamw")
def _adamw(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """torch.optim.AdamW (Loshchilov & Hutter 2019), the Kim et al. 2025 baseline."""
    return torch.optim.AdamW(
        decay_groups(model, cfg.weight_decay),
        lr=cfg.lr,
        betas=tuple(cfg.betas),
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
    )


def _distributed_mode(model: nn.Module) -> str:
    """Muon's and Scion's ``distributed_mode``: 'fsdp' for sharded (DTensor) params (each
    matrix's row shards gathered on an owner rank: optim.distributed.fsdp_matrix_apply);
    'ddp' when several ranks hold the full, all-reduced gradients (the Newton-Schulz work
    split across ranks: optim.distributed.ddp_matrix_apply); else 'none'."""
    if is_sharded(model):
        return "fsdp"
    return "ddp" if dist.is_initialized() and dist.get_world_size() > 1 else "none"


def _bf16(model: nn.Module) -> bool:
    return any(p.dtype == torch.bfloat16 for p in model.parameters())


@register("sr-adamw")
def _sr_adamw(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """optim.AdamW: fp32 moments and math; bf16 params written back with stochastic rounding."""
    from optim import AdamW

    return AdamW(
        decay_groups(model, cfg.weight_decay),
        lr=cfg.lr,
        betas=tuple(cfg.betas),
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
        stochastic_rounding=cfg.stochastic_rounding,
    )


@register("muon")
def _muon(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """optim.Muon on hidden matrices; AdamW (lr = aux_lr or lr) on embedding/head (decayed)
    and 1-D gains (not decayed), the same decay rule as 'adamw'."""
    from optim import Muon, muon_param_groups

    aux = {"lr": cfg.aux_lr if cfg.aux_lr is not None else cfg.lr, "betas": tuple(cfg.betas),
           "eps": cfg.eps}
    groups = []
    for group in muon_param_groups(model, adamw=aux):
        if group["use_muon"]:
            groups.append(group)
            continue
        mats = [p for p in group["params"] if p.ndim >= 2]
        vecs = [p for p in group["params"] if p.ndim < 2]
        if mats:
            groups.append({**group, "params": mats, "weight_decay": cfg.weight_decay})
        if vecs:
            groups.append({**group, "params": vecs, "weight_decay": 0.0})
    return Muon(
        groups,
        lr=cfg.lr,
        momentum=cfg.momentum,
        weight_decay=cfg.weight_decay,
        nesterov=cfg.nesterov,
        ns_steps=cfg.ns_steps,
        coefficients=cfg.ns_coefficients,
        shape_scale=cfg.muon_scale,
        betas=tuple(cfg.betas),
        eps=cfg.eps,
        stochastic_rounding=_bf16(model) and cfg.stochastic_rounding,
        distributed_mode=_distributed_mode(model),
    )


@register("scion")
def _scion(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """optim.Scion (uSCG unless ``constrained``), momentum = 1 - alpha.

    Pethick et al. 2025, arXiv 2502.07529 (LIONS-EPFL/scion).
    """
    from optim import Scion, scion_param_groups

    embed, hidden, head = cfg.scion_radii
    groups = scion_param_groups(model, embed_scale=embed, hidden_scale=hidden, head_scale=head)
    return Scion(
        [g for g in groups if g["params"]],
        lr=cfg.lr,
        momentum=cfg.momentum,
        constrained=cfg.constrained,
        stochastic_rounding=_bf16(model) and cfg.stochastic_rounding,
        distributed_mode=_distributed_mode(model),
    )
