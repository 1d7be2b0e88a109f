"""Name-based parameter roles for Llama-style models: embedding, head, hidden matrix, vector.

Routing by ndim alone is wrong (the head and embedding are 2-D; Dion README), so roles
come from module names and types: a parameter is an *embedding* if its owning module is
an ``nn.Embedding`` or a component of its dotted name is in ``embed_names``; a *head*
if a component is in ``head_names``; a *vector* if it has ≤ 1 dims; else *hidden*.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import torch
from torch import nn

__all__ = ["EMBED_NAMES", "HEAD_NAMES", "LIKELY_HEAD_NAMES", "param_roles", "warn_likely_heads"]

EMBED_NAMES: tuple[str, ...] = ("embed", "embed_tokens", "tok_embeddings", "tok_emb", "wte", "embedding")
HEAD_NAMES: tuple[str, ...] = ("lm_head", "output", "head", "unembed")


LIKELY_HEAD_NAMES: tuple[str, ...] = (
    "proj_out", "fc_out", "out_layer", "output_layer", "classifier", "cls", "logits", "to_logits",
    "readout", "decoder", "score", "final", "out",
)
"""Module names that often hold an output layer but are no ``HEAD_NAMES`` (``warn_likely_heads``);
attention's ``out_proj`` / ``o_proj`` / ``c_proj`` are hidden matrices and not listed."""


def warn_likely_heads(model: nn.Module, rows: list[tuple[str, torch.nn.Parameter, str]], caller: str) -> None:
    """One warning naming every 2-D param routed as *hidden* that looks like an output head or
    an embedding: a dim equal to an ``nn.Embedding``'s vocabulary size, or a module name in
    ``LIKELY_HEAD_NAMES``. A head trained as a hidden matrix is a silent recipe change
    (Muon does worse on it, KellerJordan/Muon #13; Scion's head is Sign, not Spectral)."""
    vocab = {m.num_embeddings for m in model.modules() if isinstance(m, nn.Embedding)}
    found = []
    for name, p, role in rows:
        if role != "hidden" or p.ndim != 2:
            continue
        parts = name.split(".")[:-1]
        module = ".".join(parts)
        why = None
        if set(parts) & set(LIKELY_HEAD_NAMES):
            why = "its name"
        elif vocab & set(p.shape):
            why = f"a dim equal to the embedding's vocabulary ({sorted(vocab & set(p.shape))[0]})"
        if why:
            found.append(f"{name} {tuple(p.shape)} ({why}; head_names=[{module!r}] or embed_names=[{module!r}])")
    if found:
        warnings.warn(
            f"{caller}: routed as hidden matrices, but they look like an output head or an embedding: "
            f"{'; '.join(found)}. Pass head_names=/embed_names= if they are (silence with "
            "warnings.filterwarnings if they are not).",
            UserWarning,
            stacklevel=3,
        )


def param_roles(
    model: nn.Module,
    *,
    embed_names: Iterable[str] = EMBED_NAMES,
    head_names: Iterable[str] = HEAD_NAMES,
) -> list[tuple[str, torch.nn.Parameter, str]]:
    """(name, param, role) for each distinct parameter, role in embed|head|hidden|vector.

    A parameter shared by an embedding and a head (tied weights) gets role "head".
    """
    embed_names, head_names = set(embed_names), set(head_names)
    embed_ids = {
        id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)
    }
    seen: dict[int, int] = {}
    rows: list[tuple[str, torch.nn.Parameter, str]] = []
    for name, p in model.named_parameters(remove_duplicate=False):
        parts = set(name.split(".")[:-1])
        if p.ndim <= 1:
            role = "vector"
        elif parts & head_names:
            role = "head"
        elif id(p) in embed_ids or parts & embed_names:
            role = "embed"
        else:
            role = "hidden"
        if id(p) in seen:  # tied: a second name for the same tensor
            i = seen[id(p)]
            if role == "head" or rows[i][2] == "head":
                rows[i] = (rows[i][0], p, "head")
            continue
        seen[id(p)] = len(rows)
        rows.append((name, p, role))
    return rows
