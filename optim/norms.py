"""Per-layer operator norms (Disco, rakkit/disco; Filatov et al., arXiv 2510.03871).

For W viewed as ``[fan_out, fan_in]`` and computed in fp32:

| name | definition |
|---|---|
| rms_to_rms | σ_max · sqrt(fan_in / fan_out) |
| l1_to_rms | max_j ‖W[:, j]‖₂ / sqrt(fan_out) |
| rms_to_inf | sqrt(fan_in) · max_i ‖W[i, :]‖₂ |
| supremum | max |W_ij| |
| frobenius | ‖W‖_F |
| condition_number | σ_max / (σ_min + 1e-20), from ``svdvals`` |

``transpose=True`` is for the embedding ``[vocab, dim]``: it is read as Wᵀ, so fan_in =
vocab and ``l1_to_rms`` is the largest token-row RMS. The output head ``[vocab, dim]`` is
not transposed. Tensors with > 2 dims are flattened to ``[shape[0], -1]``; 1-D params are
lifted to diag(w) (closed forms below, no n×n matrix); 0-D scalars have only ``supremum``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import nn

from ._roles import EMBED_NAMES, HEAD_NAMES, param_roles

__all__ = [
    "DEFAULT_KINDS",
    "NORMS",
    "compute_norm",
    "condition_number",
    "frobenius",
    "l1_to_rms",
    "layer_norms",
    "rms_to_inf",
    "rms_to_rms",
    "spectral",
    "supremum",
    "tensor_norms",
    "update_norms",
]

NORMS = ("rms_to_rms", "l1_to_rms", "rms_to_inf", "supremum", "frobenius", "condition_number")
DEFAULT_KINDS = ("rms_to_rms", "l1_to_rms", "rms_to_inf", "supremum", "frobenius")
"""What ``layer_norms`` records by default; condition_number needs a full SVD, ask for it."""

POWER_SEED = 0
"""Seed of the fixed power-iteration start vector (deterministic on every host and rank)."""


def _matrix(w: torch.Tensor, transpose: bool) -> torch.Tensor:
    """fp32 ``[fan_out, fan_in]`` view of a ≥2-D tensor (the embedding transposed)."""
    m = w.detach().to(torch.float32)
    m = m.reshape(m.shape[0], -1)
    return m.t() if transpose else m


def _need_1d(w: torch.Tensor, name: str) -> None:
    if w.ndim == 0:
        raise ValueError(f"{name}: a 0-D scalar has only the supremum norm")


def spectral(w: torch.Tensor, iters: int = 20, *, transpose: bool = False) -> torch.Tensor:
    """σ_max by power iteration on the smaller Gram matrix, from a fixed-seed start.

    A lower bound on σ_max; with start components c_i on the right singular vectors the
    relative error of σ̂² is ≤ (Σ_{i>1} c_i² / c_1²)·(σ_2/σ_1)^(4·iters).
    """
    _need_1d(w, "spectral")
    if w.ndim == 1:
        return w.detach().to(torch.float32).abs().max()
    m = _matrix(w, transpose)
    if m.shape[0] < m.shape[1]:
        m = m.t()  # [big, small]: iterate in the small dimension
    gen = torch.Generator().manual_seed(POWER_SEED)
    v = torch.randn(m.shape[1], generator=gen, dtype=torch.float32).to(m.device)  # [small]
    for _ in range(iters):
        v = m.t() @ (m @ v)
        v = v / v.norm().clamp_min(torch.finfo(torch.float32).tiny)
    return (m @ v).norm()


def _sigma_max(w: torch.Tensor, transpose: bool, iters: int | None) -> torch.Tensor:
    if iters is not None:
        return spectral(w, iters, transpose=transpose)
    return torch.linalg.svdvals(_matrix(w, transpose))[0]


def rms_to_rms(w: torch.Tensor, *, transpose: bool = False, iters: int | None = None) -> torch.Tensor:
    """σ_max·sqrt(fan_in/fan_out); exact (svdvals) or, with ``iters``, by power iteration."""
    _need_1d(w, "rms_to_rms")
    if w.ndim == 1:  # diag(w): σ_max = max|w|, square
        return w.detach().to(torch.float32).abs().max()
    fan_out, fan_in = _matrix(w, transpose).shape
    return _sigma_max(w, transpose, iters) * math.sqrt(fan_in / fan_out)


def l1_to_rms(w: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
    """max_j ‖W[:, j]‖₂ / sqrt(fan_out) (the largest column RMS)."""
    _need_1d(w, "l1_to_rms")
    if w.ndim == 1:  # column j of diag(w) is w_j·e_j
        return w.detach().to(torch.float32).abs().max() / math.sqrt(w.numel())
    m = _matrix(w, transpose)
    return m.norm(dim=0).max() / math.sqrt(m.shape[0])


def rms_to_inf(w: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
    """sqrt(fan_in)·max_i ‖W[i, :]‖₂."""
    _need_1d(w, "rms_to_inf")
    if w.ndim == 1:
        return w.detach().to(torch.float32).abs().max() * math.sqrt(w.numel())
    m = _matrix(w, transpose)
    return m.norm(dim=1).max() * math.sqrt(m.shape[1])


def supremum(w: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
    """max |W_ij| (defined for scalars too)."""
    return w.detach().to(torch.float32).abs().max()


def frobenius(w: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
    """‖W‖_F (equal for diag(w) and w)."""
    _need_1d(w, "frobenius")
    return w.detach().to(torch.float32).norm()


def condition_number(w: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
    """σ_max / (σ_min + 1e-20) from svdvals (diag(w): max|w| / (min|w| + 1e-20))."""
    _need_1d(w, "condition_number")
    s = w.detach().to(torch.float32).abs() if w.ndim == 1 else torch.linalg.svdvals(_matrix(w, transpose))
    return s.max() / (s.min() + 1e-20)


_FUNCS = {
    "rms_to_rms": rms_to_rms,
    "l1_to_rms": l1_to_rms,
    "rms_to_inf": rms_to_inf,
    "supremum": supremum,
    "frobenius": frobenius,
    "condition_number": condition_number,
}


def compute_norm(w: torch.Tensor, norm: str, *, transpose: bool = False, iters: int | None = None) -> torch.Tensor:
    """One named norm of ``w`` as a 0-D fp32 tensor; ``iters`` selects power iteration for rms_to_rms."""
    if norm not in _FUNCS:
        raise ValueError(f"unknown norm {norm!r}; one of {NORMS}")
    if norm == "rms_to_rms":
        return rms_to_rms(w, transpose=transpose, iters=iters)
    return _FUNCS[norm](w, transpose=transpose)


def tensor_norms(
    tensors: Iterable[tuple[str, torch.Tensor, str]],
    *,
    kinds: Iterable[str] = DEFAULT_KINDS,
    power_iters: int | None = None,
) -> list[dict]:
    """Rows {layer, param, norm, value} for (dotted name, tensor, role) triples.

    role "embed" is read transposed; 0-D tensors give only ``supremum``. DTensors are
    gathered with ``full_tensor()`` (a collective: call on every rank).
    """
    kinds = tuple(kinds)
    for k in kinds:
        if k not in _FUNCS:
            raise ValueError(f"unknown norm {k!r}; one of {NORMS}")
    keys, values = [], []
    for name, t, role in tensors:
        if type(t).__name__ == "DTensor":
            t = t.full_tensor()
        layer, _, leaf = name.rpartition(".")
        for k in kinds:
            if t.ndim == 0 and k != "supremum":
                continue
            keys.append((layer, leaf, k))
            values.append(compute_norm(t, k, transpose=role == "embed", iters=power_iters).cpu())
    vals = torch.stack(values).tolist() if values else []
    return [{"layer": a, "param": b, "norm": c, "value": v} for (a, b, c), v in zip(keys, vals)]


def layer_norms(
    model: nn.Module,
    *,
    kinds: Iterable[str] = DEFAULT_KINDS,
    embed_names: Iterable[str] = EMBED_NAMES,
    head_names: Iterable[str] = HEAD_NAMES,
    power_iters: int | None = None,
) -> list[dict]:
    """Weight norms of every parameter of ``model``: rows {layer, param, norm, value}.

    Embeddings (``nn.Embedding`` or a name in ``embed_names``) are transposed; heads are not.
    """
    roles = param_roles(model, embed_names=embed_names, head_names=head_names)
    return tensor_norms(((n, p, r) for n, p, r in roles), kinds=kinds, power_iters=power_iters)


def update_norms(
    model: nn.Module,
    updates: Mapping[torch.Tensor | str, torch.Tensor],
    *,
    kinds: Iterable[str] = DEFAULT_KINDS,
    embed_names: Iterable[str] = EMBED_NAMES,
    head_names: Iterable[str] = HEAD_NAMES,
    power_iters: int | None = None,
) -> list[dict]:
    """Norms of per-parameter update tensors (e.g. the applied step -η·u, or p_after - p_before).

    ``updates`` maps a parameter (the object) or its name to a tensor of the param's shape;
    parameters absent from the map are skipped. Same rows and roles as ``layer_norms``.
    """
    by_id = {id(k): v for k, v in updates.items() if torch.is_tensor(k)}
    by_name = {k: v for k, v in updates.items() if isinstance(k, str)}
    triples = []
    for name, p, role in param_roles(model, embed_names=embed_names, head_names=head_names):
        u = by_id.get(id(p), by_name.get(name))
        if u is not None:
            triples.append((name, u, role))
    return tensor_norms(triples, kinds=kinds, power_iters=power_iters)
