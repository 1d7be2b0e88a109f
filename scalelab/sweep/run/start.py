"""Starting a sweep: the one way ``scalelab sweep``, ``scalelab demo``, ``scalelab tune``
and the adaptive loop (``scalelab.adaptive.loop``) open a sweep directory and launch
plans into it.

- ``plan_sweep(spec)``: the spec's plan (``plan.expand``, with the facts of its local
  datasets);
- ``start_sweep(spec, sweep_dir)``: makes the directory and copies the spec into it as
  ``spec.yaml`` with its manifest (``store.sweep_files``; ``text``: what the caller
  launched, when that is not the spec's own text),
  and returns the ``Sweep``;
- ``Sweep.launch(plan)`` / ``launch_plan``: executes a plan (``launch.execute``) or, when
  it has distillation students, stages it: teachers, then their generation jobs, then the
  students (``scalelab.distill.stages``).

``sweep`` and ``demo`` launch one plan; ``tune`` and the adaptive loop launch one plan per
round (trials, the rounds of a study), each through ``launch_plan``, so every one of them
stages a plan with students.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalelab.store.layout import SPEC_FILE
from scalelab.store.sweep_files import write_sweep_bytes
from scalelab.sweep.plan.datasets import dataset_facts
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.run.launch import execute
from scalelab.sweep.spec.load import Spec

__all__ = ["Sweep", "launch_plan", "plan_sweep", "start_sweep"]


def plan_sweep(spec: Spec) -> Plan:
    """The spec's plan: ``plan.expand`` with the facts of its local datasets."""
    return expand(spec, datasets=dataset_facts(spec))


@dataclass(frozen=True)
class Sweep:
    """A started sweep: its spec and its directory (``spec.yaml`` written)."""

    spec: Spec
    dir: Path

    def launch(self, plan: Any, **kw: Any) -> Any:
        """``launch_plan`` into this sweep with the spec's launcher."""
        return launch_plan(plan, self.dir, self.spec.launcher, **kw)


def start_sweep(spec: Spec, sweep_dir: str | Path, *, text: str | None = None) -> Sweep:
    """Make ``sweep_dir`` and write ``spec.yaml`` in it: ``text``, else the spec's text."""
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    text = spec.text if text is None else text
    write_sweep_bytes(sweep_dir / SPEC_FILE, text.encode())  # with its manifest: launch.sweep_spec reads it
    return Sweep(spec, sweep_dir)


def launch_plan(plan: Any, sweep_dir: str | Path, launcher: Any, *, wait: bool,
                executor: str | None = None, backend: Any = None, target: str | None = None,
                progress: bool = True) -> Any:
    """Launch ``plan``: staged (teachers -> generation -> students) when it has
    distillation students, else ``launch.execute``. ``backend`` (a test double) is
    ``execute``'s; a staged launch makes its own, one per stage."""
    from scalelab.distill.stages import execute_staged, has_students

    kw = {"target": target} if target else {}
    if has_students(plan):
        if backend is not None:
            raise ValueError("a plan with distillation students is launched in stages, "
                             "each with its own backend: pass executor=, not backend=")
        return execute_staged(plan, sweep_dir, launcher, wait=wait, executor=executor,
                              progress=progress, **kw)
    return execute(plan, sweep_dir, launcher, wait=wait, executor=executor, backend=backend,
                   progress=progress, **kw)
