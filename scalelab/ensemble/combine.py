"""Combining the predictions of K ensemble members (pure math, no I/O).

Kim et al. 2025 (arXiv 2509.14786) average the members' **logits** (arithmetic mean,
temperature 1) and only then apply softmax and cross-entropy:

    log p_ens(y | x) = log_softmax( (1/K) * sum_k z_k(x) )[y]                 ("logits")

The classical alternative averages the members' **probabilities** (a mixture):

    log p_ens(y | x) = logsumexp_k( log_softmax(z_k(x))[y] ) - log K            ("probs")

By Jensen, the "probs" NLL is never above the mean member NLL; "logits" is a product of
experts (a geometric mean, renormalised) and is what the paper reports.

``PrefixEnsemble`` evaluates every K = 1..M in one pass over the members: it keeps one
running accumulator the size of a logits tensor, so memory does not grow with M.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

__all__ = ["METHODS", "Method", "PrefixEnsemble", "ensemble_log_probs", "ensemble_nll"]

Method = Literal["logits", "probs"]
METHODS: tuple[str, ...] = ("logits", "probs")


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"ensemble method {method!r} is not one of {', '.join(METHODS)}")


def ensemble_log_probs(logits: torch.Tensor, method: Method = "logits") -> torch.Tensor:
    """Log-probabilities of the ensemble of the K members stacked on dim 0.

    logits: [K, ..., V] (any float dtype; computed in fp32) -> [..., V] fp32 log-probs.
    """
    _check_method(method)
    z = logits.float()
    if method == "logits":
        return F.log_softmax(z.mean(dim=0), dim=-1)  # mean over K of [..., V], then normalise
    k = z.shape[0]
    return torch.logsumexp(F.log_softmax(z, dim=-1), dim=0) - math.log(k)


def ensemble_nll(logits: torch.Tensor, targets: torch.Tensor, method: Method = "logits") -> torch.Tensor:
    """Per-token negative log-likelihood of the ensemble.

    logits: [K, B, T, V], targets: [B, T] int64 -> [B, T] fp32 NLL (nats).
    """
    logp = ensemble_log_probs(logits, method)  # [B, T, V]
    return -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


class PrefixEnsemble:
    """Running ensemble of members 0..k-1, fed one member's logits at a time.

    ``add(z_k)`` with z_k: [B, T, V]; then ``nll(targets)`` -> [B, T] NLL of the ensemble of
    all members added so far. "logits" keeps sum_k z_k; "probs" keeps
    logsumexp_k log_softmax(z_k) (numerically stable; no probabilities are materialised).
    """

    def __init__(self, method: Method = "logits"):
        _check_method(method)
        self.method = method
        self.k = 0
        self._acc: torch.Tensor | None = None  # [B, T, V] fp32

    def add(self, logits: torch.Tensor) -> None:
        z = logits.float()
        term = z if self.method == "logits" else F.log_softmax(z, dim=-1)
        if self._acc is None:
            self._acc = term.clone()
        elif self._acc.shape != term.shape:
            raise ValueError(f"member logits shape {tuple(term.shape)} != {tuple(self._acc.shape)}")
        elif self.method == "logits":
            self._acc.add_(term)
        else:
            self._acc = torch.logaddexp(self._acc, term)
        self.k += 1

    def log_probs(self) -> torch.Tensor:
        """[B, T, V] log-probabilities of the current K-member ensemble."""
        if self._acc is None:
            raise ValueError("PrefixEnsemble is empty: add at least one member's logits")
        if self.method == "logits":
            return F.log_softmax(self._acc / self.k, dim=-1)
        return self._acc - math.log(self.k)

    def nll(self, targets: torch.Tensor) -> torch.Tensor:
        """targets [B, T] int64 -> [B, T] NLL of the current ensemble."""
        return -self.log_probs().gather(-1, targets.unsqueeze(-1)).squeeze(-1)
