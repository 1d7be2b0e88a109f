"""Launching a sweep with distillation students in dependency order.

A plan whose runs include students (``distill`` active, with teachers) runs in three
stages, on every backend:

1. every other run (the teachers among them), through ``scalelab.sweep.run.launch.execute``;
2. one generation job per distinct (teachers, generation parameters)
   (``<sweep>/generate/<gen_key>/``, target ``scalelab.distill.job:generate_job``), for
   students with a synthetic weight; a job already COMPLETED is skipped;
3. the students, through ``execute``.

On Slurm the three stages are submitted at once and chained by dependencies:
generation jobs get ``--dependency=afterok:<teacher jobs>`` and students
``afterok:<generation jobs (and teacher jobs, for logit KD)>`` (submitit
``slurm_additional_parameters``). Only jobs still known to the scheduler (submitted now,
or holding a live claim) are named; teachers already COMPLETED on disk need no
dependency. On the local and debug backends the stages simply run one after the other;
students whose generation failed are not launched. Every job runs with its run's launcher
(``Plan.launchers``): a generation job with its first student's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from scalelab import strict
from scalelab.distill.job import TARGET
from scalelab.distill.resolve import generation_key, needs_generation, teacher_dir
from scalelab.store.atomic import write_yaml_atomic
from scalelab.store.layout import RUNS_FOLDER
from scalelab.store.status import State, read_status
from scalelab.sweep.plan.resources import launchers_of
from scalelab.sweep.run.launch import ReportCounts

__all__ = ["StagedReport", "execute_staged", "has_students", "is_dependent"]


def is_dependent(cfg) -> bool:
    """A run that needs its teachers finished first (sequence-level or logit KD)."""
    return cfg.distill.active and bool(cfg.distill.teachers or cfg.distill.teacher)


def has_students(plan: Any) -> bool:
    return any(is_dependent(c) for c in plan.configs)


@dataclass
class _SubPlan:
    table: pl.DataFrame
    configs: list
    launchers: list


@dataclass
class StagedReport(ReportCounts):
    """The launch reports of the stages, and the generation jobs."""

    reports: list = field(default_factory=list)
    generation: dict[str, str] = field(default_factory=dict)
    """gen_key -> job id, or 'skip: <reason>'."""

    @property
    def decisions(self) -> pl.DataFrame:
        return pl.concat([r.decisions for r in self.reports], how="diagonal_relaxed")

    @property
    def handles(self) -> list:
        return [h for r in self.reports for h in r.handles]

    @property
    def results(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in self.reports:
            out.update(r.results)
        return out

    @property
    def sweep_dir(self) -> Path:
        return self.reports[0].sweep_dir

    @property
    def backend(self) -> str:
        return self.reports[0].backend


def _subplan(launchers: list, plan: Any, rows: list[int], deps: list[str] | None = None) -> _SubPlan:
    """Rows of ``plan``; with ``deps``, each run's launcher waits for those jobs."""
    own = [launchers[i] for i in rows]
    if deps is not None:
        own = [_with_dependency(launcher, deps) for launcher in own]
    return _SubPlan(plan.table[rows], [plan.configs[i] for i in rows], own)


def _with_dependency(launcher: Any, job_ids: list[str]) -> Any:
    extra = dict(launcher.slurm_additional or {})
    extra.pop("dependency", None)
    if job_ids:
        extra["dependency"] = "afterok:" + ":".join(sorted(set(job_ids)))
    return dataclasses.replace(launcher, slurm_additional=extra)


def _live_job_ids(sweep_dir: Path, run_dirs: list[str]) -> dict[str, str]:
    """run_dir -> job id of runs that a live Slurm job holds (launched earlier)."""
    from scalelab.sweep.run.observe import observe

    out = {}
    on_disk = (teacher_dir(sweep_dir / RUNS_FOLDER, d.removeprefix(f"{RUNS_FOLDER}/")) for d in run_dirs)
    for rel, view in zip(run_dirs, observe(on_disk)):
        if view.live and view.claim is not None and view.claim.job_id:
            out[rel] = str(view.claim.job_id)
    return out


def execute_staged(plan: Any, sweep_dir: str | Path, launcher: Any, *, wait: bool,
                   executor: str | None = None, retry_failed: bool = False,
                   retry_preempted: bool = False, progress: bool = True, target: str | None = None,
                   log=print) -> StagedReport:
    """Launch ``plan`` in dependency order (see the module docstring). ``target``: the
    train function of ordinary runs and students (tests), as in ``execute``."""
    from scalelab.sweep.run.backends import make_backend
    from scalelab.sweep.run.job import CONFIG_INPUT, JobSpec
    from scalelab.sweep.run.launch import execute

    sweep_dir = Path(sweep_dir).resolve()
    launchers = launchers_of(plan, launcher)
    dependent = [i for i, c in enumerate(plan.configs) if is_dependent(c)]
    others = [i for i in range(len(plan.configs)) if i not in set(dependent)]
    common = dict(executor=executor, retry_failed=retry_failed, retry_preempted=retry_preempted, progress=progress)
    if target:
        common["target"] = target
    out = StagedReport()
    probe = make_backend(launcher, sweep_dir, executor, progress=progress)
    on_cluster = probe.returns_at_once

    # Stage 1: teachers and every other run.
    # On a cluster nothing waits until every stage is queued (the dependencies order them).
    first = execute(_subplan(launchers, plan, others), sweep_dir, launcher, wait=not on_cluster, **common)
    out.reports.append(first)
    run_dir_of = dict(zip(plan.table["run_id"].to_list(), plan.table["run_dir"].to_list()))
    teacher_job = {run_dir_of[h.run_id]: h.job_id for h in first.handles}
    if on_cluster:
        all_teachers = sorted({f"runs/{t}" for i in dependent for t in plan.configs[i].distill.teachers})
        teacher_job.update({k: v for k, v in _live_job_ids(sweep_dir, all_teachers).items() if k not in teacher_job})

    def teacher_jobs(cfg) -> list[str]:
        return [teacher_job[f"runs/{t}"] for t in cfg.distill.teachers if f"runs/{t}" in teacher_job]

    # Stage 2: one generation job per distinct (teachers, parameters).
    gen_job: dict[str, str] = {}
    gen_ok: dict[str, bool] = {}
    gen_handles: list = []
    for i in dependent:
        cfg = plan.configs[i]
        if not needs_generation(cfg):
            continue
        key = generation_key(cfg)
        if key in gen_ok:
            continue
        gen_dir = sweep_dir / "generate" / key
        state = (read_status(gen_dir) or {}).get("state")
        if state == State.COMPLETED.value:
            gen_ok[key], out.generation[key] = True, "skip: completed"
            continue
        write_yaml_atomic(gen_dir / CONFIG_INPUT, strict.to_dict(cfg))
        gen_launcher = _with_dependency(launchers[i], teacher_jobs(cfg))
        backend = make_backend(gen_launcher, sweep_dir, executor, progress=False)
        (handle,) = backend.submit([JobSpec(key, f"generate-{key}", str(gen_dir), TARGET)], gen_launcher)
        out.generation[key] = handle.job_id
        gen_handles.append(handle)
        if on_cluster:
            gen_job[key], gen_ok[key] = handle.job_id, True
        else:
            result = backend.wait([handle])
            gen_ok[key] = result.get(key) == State.COMPLETED.value
            log(f"generation {key}: {result.get(key)}")

    # Stage 3: students, grouped by the jobs they wait for.
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in dependent:
        cfg = plan.configs[i]
        if needs_generation(cfg) and not gen_ok.get(generation_key(cfg), False):
            log(f"student {cfg.name}: not launched, its teacher generation did not complete")
            continue
        deps = teacher_jobs(cfg) if cfg.distill.kd_weight > 0 else []
        if needs_generation(cfg) and generation_key(cfg) in gen_job:
            deps.append(gen_job[generation_key(cfg)])
        groups.setdefault(tuple(sorted(set(deps))), []).append(i)
    for deps, rows in groups.items():
        out.reports.append(execute(_subplan(launchers, plan, rows, list(deps)), sweep_dir, launcher,
                                   wait=not on_cluster, **common))
    if on_cluster and wait:
        results = probe.wait(out.handles + gen_handles)
        for report in out.reports:
            report.results = {h.run_id: results[h.run_id] for h in report.handles}
    return out
