"""What the train loop calls for a distillation run (``scalelab.train.loop``).

* ``mixture_stream``: the real + teacher-token stream (``MixtureStream``) replacing the
  plain ``TrainStream`` when ``distill.synthetic_weight`` > 0. The teacher text is the
  generation job's (a cache hit); when missing (e.g. ``scalelab train`` on a student
  alone) a single-process run generates it first, a distributed one stops with a message.
* ``KDLoss``: the loss (1 - alpha)·CE + alpha·tau²·KL(teacher ensemble || student)
  replacing plain cross-entropy when ``distill.kd_weight`` > 0. The teachers' logits are
  averaged as in Kim et al.'s ensembles; with a mixture the KL applies to every row.
"""

from __future__ import annotations

from pathlib import Path

import torch

from scalelab.config import DataConfig, RunConfig
from scalelab.distill.generate import check_teacher, find_cached, synthetic_id
from scalelab.distill.kd import TeacherEnsemble, kd_loss
from scalelab.distill.mixture import MixtureStream, open_synthetic
from scalelab.distill.resolve import generation_params, synthetic_cache_dir, teacher_dirs
from scalelab.ensemble.load import load_trained
from scalelab.errors import UserError

__all__ = ["KDLoss", "build_kd_loss", "mixture_stream"]


def mixture_stream(cfg: RunConfig, run_dir: str | Path, dataset, data_cfg: DataConfig, global_batch: int,
                   *, world_size: int = 1, log=print) -> MixtureStream:
    from scalelab.distill.job import synthetic_for

    teachers = [load_trained(d, "cpu") for d in teacher_dirs(cfg, run_dir)]
    for t in teachers:
        check_teacher(t.cfg, t.run_dir.name)
    digests, params = [t.digest for t in teachers], generation_params(cfg)
    sid = synthetic_id(digests, params)
    del teachers
    path = find_cached(synthetic_cache_dir(run_dir), sid, digests, params)
    if path is None:
        path = synthetic_cache_dir(run_dir) / sid
        if world_size > 1:
            raise UserError(f"teacher text {path} is not generated yet; launch the sweep (it generates "
                            "before the students) or train this run in one process first", key="distill")
        log(f"teacher text {sid} not found: generating it in this process")
        path = synthetic_for(cfg, run_dir, device=cfg.train.device, log=log)
    return MixtureStream(dataset, open_synthetic(path, cfg.data.seq_len), data_cfg, global_batch,
                         cfg.distill.synthetic_weight)


class KDLoss:
    """Callable ``(logits [B,T,V], x [B,T], y [B,T]) -> scalar`` loss of logit-level KD."""

    def __init__(self, teacher: TeacherEnsemble, alpha: float, temperature: float):
        self.teacher, self.alpha, self.temperature = teacher, alpha, temperature

    def __call__(self, logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        target = self.teacher(x)  # [B, T, V] fp32 log-probs, no grad
        total, _, _ = kd_loss(logits, y, target, alpha=self.alpha, temperature=self.temperature)
        return total


def build_kd_loss(cfg: RunConfig, run_dir: str | Path, device: torch.device) -> KDLoss:
    teachers = [load_trained(d, device) for d in teacher_dirs(cfg, run_dir)]
    for t in teachers:
        check_teacher(t.cfg, t.run_dir.name)
    models = [t.model for t in teachers]
    return KDLoss(TeacherEnsemble(models), cfg.distill.kd_weight, cfg.distill.kd_temperature)
