"""Route a model's parameters between Muon and AdamW by name and shape.

Muon gets the hidden matrices (q/k/v/o, MLP, flattened conv filters); AdamW gets the
embedding, the LM head (Muon does worse on it: KellerJordan/Muon #13) and every 0/1-D
gain, bias and scalar. ``ndim == 2`` is not enough: the embedding and the head are 2-D
too (Dion README), so roles come from module names and types (``optim._roles``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from torch import nn

from optim._roles import EMBED_NAMES, HEAD_NAMES, param_roles, warn_likely_heads
from optim.fused_qkv import split_fused

__all__ = ["ADAMW_GROUP_DEFAULTS", "muon_param_groups", "route_params"]

ADAMW_GROUP_DEFAULTS: dict[str, Any] = {"lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-10, "weight_decay": 0.0}
"""The AdamW groups' own hyperparameters in ``muon_param_groups`` (KellerJordan/Muon's
``MuonWithAuxAdam`` defaults for its ``use_muon=False`` groups), written into each group so
they never fall back to ``optim.Muon``'s lr (0.02, a Muon step size)."""


def route_params(
    model: nn.Module,
    *,
    embed_names: Iterable[str] = EMBED_NAMES,
    head_names: Iterable[str] = HEAD_NAMES,
) -> dict[str, list[str]]:
    """Parameter names per optimizer: {"muon": [...], "adamw": [...]} (tied weights once;
    frozen params, ``requires_grad=False``, left out)."""
    out: dict[str, list[str]] = {"muon": [], "adamw": []}
    for name, p, role in param_roles(model, embed_names=embed_names, head_names=head_names):
        if p.requires_grad:
            out["muon" if role == "hidden" else "adamw"].append(name)
    return out


def muon_param_groups(
    model: nn.Module,
    *,
    embed_names: Iterable[str] = EMBED_NAMES,
    head_names: Iterable[str] = HEAD_NAMES,
    muon: Mapping[str, Any] | None = None,
    adamw: Mapping[str, Any] | None = None,
    fused_qkv: str = "split",
) -> list[dict[str, Any]]:
    """Param groups for ``optim.Muon``'s hybrid mode: hidden matrices with ``use_muon=True``,
    everything else with ``use_muon=False`` (stepped by AdamW).

    ``muon`` / ``adamw`` are extra group options (e.g. ``adamw={"lr": 1e-3, "eps": 1e-8}``).
    Unset Muon keys fall back to ``optim.Muon``'s defaults; the AdamW group gets every AdamW key
    explicitly, ``ADAMW_GROUP_DEFAULTS`` (lr 3e-4, betas (0.9, 0.95), eps 1e-10, wd 0) updated
    by ``adamw``, so it never inherits Muon's lr. Frozen params (``requires_grad=False``) are
    left out, as in ``optim.scion_param_groups``: they get no group and no optimizer state.
    Empty groups are left out.
    fused_qkv: "split" puts fused [3·d, d] QKV weights (``optim.fused_qkv``) in a Muon group with
    ``blocks=3``: Newton-Schulz and the shape scale per Q/K/V block; a weight named like one
    whose blocks cannot be told stays whole, with one warning. "whole": no special case.
    """
    hidden, other = [], []
    rows = param_roles(model, embed_names=embed_names, head_names=head_names)
    warn_likely_heads(model, [r for r in rows if r[1].requires_grad], "muon_param_groups")
    for name, p, role in rows:
        if p.requires_grad:
            (hidden if role == "hidden" else other).append((name, p))
    hidden, fused = split_fused(hidden, fused_qkv, "muon_param_groups")
    other = [p for _, p in other]
    groups = []
    if hidden:
        groups.append({**dict(muon or {}), "params": hidden, "use_muon": True})
    if fused:
        groups.append({**dict(muon or {}), "params": fused, "use_muon": True, "blocks": 3})
    if other:
        groups.append({**ADAMW_GROUP_DEFAULTS, **dict(adamw or {}), "params": other, "use_muon": False})
    return groups
