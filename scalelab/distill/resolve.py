"""Where a distillation run's teachers and teacher text live, and the teacher selector.

Sweep layout (the run directories of README.md "Concepts" plus two folders):

    <sweep>/runs/<teacher-run>/            the teachers (ordinary runs of the sweep)
    <sweep>/generate/<gen_key>/            one generation job: config-input.yaml, status.json
    <sweep>/synthetic/<synthetic_id>/      its token directory (content-hashed, cached)
    <sweep>/runs/<student-run>/            the student

``distill.teachers`` names run directories under ``<sweep>/runs/`` (or absolute paths;
a name whose run lives in a directory adopted under another name resolves to that one,
recorded in plan.parquet: ``teacher_dir``);
the sweep directory of a run dir or a generation dir is its grandparent. An absolute path
must hold a run when the plan is made (``missing_teacher``); a name may be a run that the
same sweep trains first. The planner
fills ``teachers`` from the ``distill.teacher`` selector (``resolve_teachers``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from scalelab import strict
from scalelab.config import RunConfig
from scalelab.distill.generate import GenerationParams, check_teacher
from scalelab.errors import UserError
from scalelab.identity import canonical_json, id_in_name, run_dir_name
from scalelab.store.layout import CONFIG_FILE, PLAN_FILE, RUNS_FOLDER
from scalelab.store.sweep_files import read_sweep_file

__all__ = [
    "generation_key",
    "generation_params",
    "missing_teacher",
    "needs_generation",
    "resolve_teachers",
    "synthetic_cache_dir",
    "teacher_dir",
    "teacher_dirs",
]


def generation_params(cfg: RunConfig) -> GenerationParams:
    d = cfg.distill
    return GenerationParams(
        n_tokens=d.synthetic_tokens, seq_len=cfg.data.seq_len, prompt_len=d.prompt_len,
        seed=d.seed, temperature=d.temperature,
    )


def needs_generation(cfg: RunConfig) -> bool:
    return cfg.distill.synthetic_weight > 0


def generation_key(cfg: RunConfig) -> str:
    """The sha256 (all 64 hex) naming the generation job of a student: its teachers (by run
    dir) and the generation parameters. Students that share both share one job; whole, as
    the run id's full hash, since the key decides which students share a job and the
    folder ``<sweep>/generate/<key>/`` whose COMPLETED status skips it."""
    blob = canonical_json({"teachers": list(cfg.distill.teachers),
                           "params": dataclasses.asdict(generation_params(cfg))})
    return hashlib.sha256(blob.encode()).hexdigest()


def _sweep_of(run_dir: str | Path) -> Path:
    return Path(run_dir).resolve().parent.parent


def teacher_dirs(cfg: RunConfig, run_dir: str | Path) -> list[Path]:
    """The teachers' run directories for a run (or generation job) at ``run_dir``."""
    if not cfg.distill.teachers:
        raise UserError(
            "no teachers: give distill.teachers, or distill.teacher resolved by the sweep planner",
            key="distill.teachers",
        )
    runs = _sweep_of(run_dir) / RUNS_FOLDER
    out = [teacher_dir(runs, t) for t in cfg.distill.teachers]
    for path in out:
        if not _is_run(path):
            raise UserError(f"teacher run {path} does not exist (or never started)", key="distill.teachers")
    return out


def teacher_dir(runs: Path, teacher: str) -> Path:
    """The run directory of one entry of ``distill.teachers``: an absolute path as given;
    a name under the sweep's ``runs`` folder where it exists; else, for a teacher that
    runs in a directory adopted under another name (``identity.adopted_dirs``: named
    before names were the identity's), the directory plan.parquet records for its run id
    (the launch wrote it there, after checking the directory's full id)."""
    if Path(teacher).is_absolute():
        return Path(teacher)
    path = runs / teacher
    rid = id_in_name(teacher)
    if os.path.lexists(path) or rid is None or not (runs.parent / PLAN_FILE).is_file():
        return path
    try:
        plan = read_sweep_file(runs.parent / PLAN_FILE)
    except UserError:  # damaged: the teacher reads as missing, with its canonical name
        return path
    rows = plan.filter(pl.col("run_id") == rid)["run_dir"].to_list() if "run_dir" in plan.columns else []
    held = rows[0] if rows and isinstance(rows[0], str) else ""
    name = held.removeprefix(f"{RUNS_FOLDER}/")
    ok = held.startswith(f"{RUNS_FOLDER}/") and "/" not in name and name not in ("", ".", "..")
    return runs / name if ok else path


def missing_teacher(teachers: Sequence[str]) -> str | None:
    """The first of ``teachers`` that must exist when the plan is made and does not: an
    absolute path that holds no run (names under the sweep's ``runs/`` may be trained by
    the same sweep, so only the launch can check them)."""
    return next((t for t in teachers if Path(t).is_absolute() and not _is_run(Path(t))), None)


def _is_run(path: Path) -> bool:
    """Whether ``path`` is a run directory that started (its config.yaml is written first)."""
    return (path / CONFIG_FILE).is_file()


def synthetic_cache_dir(run_dir: str | Path) -> Path:
    return _sweep_of(run_dir) / "synthetic"


def _lookup(tree: dict, key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def resolve_teachers(cfg: RunConfig, candidates: Sequence[RunConfig], *, where: str = "distill.teacher") -> RunConfig:
    """``cfg`` with ``distill.teachers`` = the run dirs of the ``candidates`` matching its
    ``distill.teacher`` selector (sorted by member), unless already given. Candidates that
    are themselves students never match."""
    selector = cfg.distill.teacher
    if not selector or cfg.distill.teachers:
        return cfg
    matches = []
    for cand in candidates:
        if cand.distill.active:
            continue
        tree = strict.to_dict(cand)
        values = {k: _lookup(tree, k) for k in selector}
        unknown = [k for k, v in values.items() if v is _MISSING and not k.startswith("extra.")]
        if unknown:
            raise UserError(f"selector key '{unknown[0]}' is not a config key", key=f"{where}.{unknown[0]}")
        if all(_same(values[k], v) for k, v in selector.items()):
            matches.append(cand)
    if not matches:
        shown = ", ".join(f"{k}={v!r}" for k, v in selector.items())
        raise UserError(f"no run of the sweep matches the teacher selector {{{shown}}}", key=where)
    matches.sort(key=lambda c: (c.member, run_dir_name(c)))
    for cand in matches:
        check_teacher(cand, run_dir_name(cand), where)
    teachers = tuple(run_dir_name(c) for c in matches)
    return dataclasses.replace(cfg, distill=dataclasses.replace(cfg.distill, teachers=teachers))
