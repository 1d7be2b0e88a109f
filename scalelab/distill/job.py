"""The teacher-generation job: a job target of the sweep backends (``scalelab.sweep.run.job``).

``generate_job(cfg, run_dir)`` runs in ``<sweep>/generate/<gen_key>/`` with the student's
RunConfig as ``config-input.yaml``: it generates (or finds cached) the teacher text the
student trains on, records the token directory in ``result.json`` and ends COMPLETED, so
Slurm's ``afterok`` releases the students. Target string: ``TARGET``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scalelab.config import RunConfig
from scalelab.distill.generate import generate
from scalelab.distill.resolve import generation_params, synthetic_cache_dir, teacher_dirs
from scalelab.store.atomic import write_json_atomic
from scalelab.store.status import State, update_status

__all__ = ["TARGET", "generate_job", "synthetic_for"]

TARGET = "scalelab.distill.job:generate_job"


def synthetic_for(cfg: RunConfig, run_dir: str | Path, *, device: str = "auto", log=print) -> Path:
    """The teacher text of a student at ``run_dir`` (generated now if not cached)."""
    return generate(teacher_dirs(cfg, run_dir), generation_params(cfg), synthetic_cache_dir(run_dir),
                    device=device, log=log)


def generate_job(cfg: RunConfig, run_dir: str | Path) -> State:
    run_dir = Path(run_dir)
    update_status(run_dir, State.RUNNING, kind="generate")
    path = synthetic_for(cfg, run_dir, device=cfg.train.device)
    write_json_atomic(run_dir / "result.json", {
        "synthetic": str(path), "teachers": list(cfg.distill.teachers),
        "params": dataclasses.asdict(generation_params(cfg)),
    })
    update_status(run_dir, State.COMPLETED, synthetic=str(path))
    return State.COMPLETED
