"""One function starts a sweep (``scalelab.sweep.run.start``): ``scalelab sweep``,
``scalelab demo``, ``scalelab tune`` and the adaptive loop write ``spec.yaml`` through
``start_sweep`` and launch every plan through ``launch_plan``, which stages a plan with
distillation students (teachers -> generation -> students) and executes any other.

The launchers are replaced by spies that record the call and stop the caller
(``Launched``), so nothing trains: what is asserted is which launcher each caller reaches.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from scalelab.cli import main
from scalelab.data.format import write_token_dir
from scalelab.sweep.run import start
from scalelab.sweep.spec.load import load_spec

STUDENTS = """
name: with_students
base:
  model: {preset: cpu-50k}
  data: {dataset: DATASET, seq_len: 8, unique_tokens: 256, epochs: 1, val_tokens: 200, subset_seed: 0}
  train: {batch_size: 8, eval_every: 0, eval_batches: 2, norms_every: 0, checkpoint_every: 1000, device: cpu}
launcher: {executor: debug}
blocks:
  - name: teachers
    members: 2
  - name: student
    base:
      distill: {teacher: {member: 0, distill.synthetic_weight: 0.0}, synthetic_weight: 0.5, synthetic_tokens: 180}
"""
"""Two teachers and a student distilled from the first (tests/scalelab/test_distill.py)."""

PLAIN = """
name: plain
base:
  model: {preset: cpu-50k}
  data: {dataset: /nonexistent/x, vocab_size: 256, unique_tokens: 2048, seq_len: 32}
  train: {batch_size: 8}
launcher: {executor: debug}
grid:
  data.epochs: [1, 2]
  optim.lr: [1.0e-3, 3.0e-3]
  optim.weight_decay: [0.0, 0.1]
tune:
  method: coordinate
  start: {data.epochs: 1, optim.lr: 1.0e-3, optim.weight_decay: 0.1}
"""


class Launched(Exception):
    """Raised by a spy launcher: the caller got as far as launching."""


@pytest.fixture
def spies(monkeypatch):
    """Replace the plain and the staged launcher; ``calls`` lists (which, plan, sweep dir)."""
    import scalelab.distill.stages as stages

    calls: list[tuple[str, object, Path]] = []

    def spy(which):
        def launch(plan, sweep_dir, launcher, **kw):
            calls.append((which, plan, Path(sweep_dir)))
            raise Launched(which)
        return launch

    monkeypatch.setattr(start, "execute", spy("execute"))
    monkeypatch.setattr(stages, "execute_staged", spy("staged"))
    return calls


@pytest.fixture
def students_spec(tmp_path) -> Path:
    toks = np.random.default_rng(0).integers(0, 64, 4000)
    corpus = write_token_dir(tmp_path / "corpus", toks, vocab_size=64, tokenizer_id="test",
                             eos_id=None, n_documents=1, sources=["rng"])
    path = tmp_path / "students.yaml"
    path.write_text(STUDENTS.replace("DATASET", str(corpus)))
    return path


def _student(active: bool):
    distill = SimpleNamespace(active=active, teachers=("t",) if active else (), teacher=None)
    return SimpleNamespace(distill=distill)


@pytest.mark.parametrize("students, which", [(True, "staged"), (False, "execute")])
def test_launch_plan_stages_a_plan_with_students(spies, tmp_path, students, which):
    plan = SimpleNamespace(configs=[_student(False), _student(students)])
    with pytest.raises(Launched, match=which):
        start.launch_plan(plan, tmp_path, launcher=None, wait=True)
    assert [c[0] for c in spies] == [which]


def test_a_staged_launch_refuses_a_backend_double(spies, tmp_path):
    plan = SimpleNamespace(configs=[_student(True)])
    with pytest.raises(ValueError, match="executor="):
        start.launch_plan(plan, tmp_path, launcher=None, wait=True, backend=object())


def test_start_sweep_writes_the_spec_copy(tmp_path, students_spec):
    spec = load_spec(students_spec)
    sweep = start.start_sweep(spec, tmp_path / "a" / "b")
    assert (sweep.dir / "spec.yaml").read_text() == spec.text == students_spec.read_text()
    start.start_sweep(spec, sweep.dir, text="other")
    assert (sweep.dir / "spec.yaml").read_text() == "other"


def test_sweep_command_stages_students(spies, tmp_path, students_spec):
    with pytest.raises(Launched, match="staged"):
        main(["sweep", str(students_spec), "--root", str(tmp_path / "root")])
    ((_, plan, sweep_dir),) = spies
    assert plan.table["block"].to_list() == ["teachers", "teachers", "student"]
    assert (sweep_dir / "spec.yaml").read_text() == students_spec.read_text()


def test_demo_stages_students(spies, tmp_path, students_spec):
    from scalelab.cli.demo import run_demo

    with pytest.raises(Launched, match="staged"):
        run_demo(students_spec, tmp_path / "root", executor="debug", echo=lambda line: None)
    ((_, plan, sweep_dir),) = spies
    assert len(plan.configs) == 3
    assert (sweep_dir / "spec.yaml").read_text() == students_spec.read_text()


def test_tune_rounds_stage_students(spies, tmp_path, students_spec):
    """The tune runner launches each round's plan through ``launch_plan``: a trial plan
    with a student is staged."""
    from scalelab.tune.study import execute_runner

    spec = load_spec(students_spec)
    runner = execute_runner(tmp_path / "sweep", spec, executor="debug")
    with pytest.raises(Launched, match="staged"):
        runner(start.plan_sweep(spec))


def test_tune_command_starts_the_sweep_and_launches_through_it(spies, tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text(PLAIN)
    with pytest.raises(Launched, match="execute"):
        main(["tune", str(path), "--root", str(tmp_path / "root"), "--executor", "debug"])
    ((_, plan, sweep_dir),) = spies
    assert sweep_dir == (tmp_path / "root" / "plain-tune").resolve()
    assert (sweep_dir / "spec.yaml").read_text() == PLAIN


def test_adaptive_loop_starts_the_sweep_and_launches_through_it(spies, tmp_path):
    from scalelab.adaptive.loop import run_adaptive_sweep

    text = textwrap.dedent("""\
        name: ad
        base:
          model: {preset: twin-5.6k}
          data: {dataset: /nonexistent/x, vocab_size: 256, unique_tokens: 2048, seq_len: 32, epochs: 4}
          train: {batch_size: 8, device: cpu}
        launcher: {executor: debug, flops_per_gpu_s: 1.0e9}
        grid:
          model.preset: [twin-5.6k, twin-10k, twin-15k, twin-26k]
          data.epochs: [1, 2]
        seeds: [0]
        """)
    path = tmp_path / "ad.yaml"
    path.write_text(text)
    with pytest.raises(Launched, match="execute"):
        run_adaptive_sweep(path, 1e9, root=tmp_path / "root", executor="debug")
    ((_, plan, sweep_dir),) = spies
    assert (sweep_dir / "spec.yaml").read_text() == text
    assert len(plan.configs) >= 1  # the seed design
