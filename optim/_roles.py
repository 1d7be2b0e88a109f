"""Name-based parameter roles for Llama-style models: embedding, head, hidden matrix, vector.

Routing by ndim alone is wrong (the head and embedding are 2-D; Dion README), so roles
come from module names and types: a parameter is an *embedding* if its owning module is
an ``nn.Embedding`` or a component of its dotted name is in ``embed_names``; a *head*
if a component is in ``head_names``; a *vector* if it has ≤ 1 dims; else *hidden*.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

__all__ = ["EMBED_NAMES", "HEAD_NAMES", "param_roles"]

EMBED_NAMES: tuple[str, ...] = ("embed", "embed_tokens", "tok_embeddings", "tok_emb", "wte", "embedding")
HEAD_NAMES: tuple[str, ...] = ("lm_head", "output", "head", "unembed")


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
