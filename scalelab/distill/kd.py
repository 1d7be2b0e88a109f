"""Logit-level knowledge distillation (Hinton et al. 2015) to a teacher ensemble.

An optional loss term beside the sequence-level distillation of Kim et al. 2025 (arXiv 2509.14786):
on *real* data the student also matches the teacher ensemble's next-token distribution,

    L = (1 - alpha) * CE(y, student) + alpha * tau^2 * KL( p_T^tau || p_S^tau ),

with p^tau = softmax(z / tau) and the teacher ensemble's logits combined as in
``scalelab.ensemble.combine`` (logit averaging by default). KL is per token, averaged over
the tokens of the batch. The tau^2 factor keeps the gradient scale independent of tau.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from scalelab.ensemble.combine import Method, ensemble_log_probs

__all__ = ["TeacherEnsemble", "kd_kl", "kd_loss"]


def kd_kl(student_logits: torch.Tensor, teacher_log_probs: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Mean per-token KL(p_T || p_S) at temperature ``temperature``, times tau^2.

    student_logits: [B, T, V]; teacher_log_probs: [B, T, V] log-probabilities at temperature 1
    (re-tempered here as log_softmax(logp_T / tau), which equals the softmax of z_T / tau for a
    single teacher and of mean-logits / tau for a logit-averaged ensemble). -> scalar.
    """
    tau = float(temperature)
    logp_s = F.log_softmax(student_logits.float() / tau, dim=-1)  # [B, T, V]
    logp_t = F.log_softmax(teacher_log_probs.float() / tau, dim=-1)  # [B, T, V]
    kl = (logp_t.exp() * (logp_t - logp_s)).sum(-1)  # [B, T]
    return kl.mean() * tau * tau


def kd_loss(
    student_logits: torch.Tensor,
    targets: torch.Tensor,
    teacher_log_probs: torch.Tensor,
    *,
    alpha: float,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(total, ce, kl): total = (1 - alpha) * CE + alpha * tau^2 * KL. targets: [B, T]."""
    ce = F.cross_entropy(student_logits.float().flatten(0, 1), targets.flatten())
    kl = kd_kl(student_logits, teacher_log_probs, temperature)
    return (1.0 - alpha) * ce + alpha * kl, ce, kl


class TeacherEnsemble(nn.Module):
    """Frozen teacher models whose combined log-probs are the KD target.

    forward(idx [B, T]) -> [B, T, V] fp32 log-probabilities of the ensemble (no grad).
    """

    def __init__(self, models: Sequence[nn.Module], method: Method = "logits"):
        super().__init__()
        if not models:
            raise ValueError("TeacherEnsemble needs at least one model")
        self.members = nn.ModuleList(models)
        self.method = method
        for p in self.members.parameters():
            p.requires_grad_(False)
        self.members.eval()

    def train(self, mode: bool = True) -> TeacherEnsemble:  # teachers stay in eval mode
        return super().train(False)

    @torch.no_grad()
    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits = torch.stack([m(idx).float() for m in self.members])  # [K, B, T, V]
        return ensemble_log_probs(logits, self.method)
