"""Distillation (Kim et al. 2025, arXiv 2509.14786): teacher text, the real/synthetic mixture,
and logit-level KD.

    from scalelab.distill import GenerationParams, generate, MixtureStream
    path = generate(teacher_run_dirs, GenerationParams(n_tokens=..., seq_len=128), cache_dir)
"""

from scalelab.distill.generate import GenerationParams, assign_members, generate, synthetic_id
from scalelab.distill.kd import TeacherEnsemble, kd_kl, kd_loss
from scalelab.distill.mixture import MixtureStream, open_synthetic, split_batch

__all__ = [
    "GenerationParams",
    "MixtureStream",
    "TeacherEnsemble",
    "assign_members",
    "generate",
    "kd_kl",
    "kd_loss",
    "open_synthetic",
    "split_batch",
    "synthetic_id",
]
