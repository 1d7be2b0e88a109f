"""``run_adaptive_sweep``: the adaptive study of a spec, run through the sweep machinery
(the loop of ``analysis.adaptive.loop``, on real runs; what ``scalelab sweep SPEC
--adaptive --budget H`` runs).

1. resume: runs of the study launched before and not ended (RUNNING without a process,
   PREEMPTED, TIMEOUT) are relaunched from the sweep's own records
   (``launch.plan_from_disk``), and waited for;
2. a study with nothing launched starts with the seed design
   (``analysis.adaptive.seed_design``: the start cell at 4 sizes spread over the ladder),
   recorded as round 0;
3. every look: collect the sweep (``scalelab.sweep.view.collect``), split the study's
   candidates (``observed``), judge the target (``analysis.adaptive.target_fits.judge``:
   ``regularized.E`` by default, or a ranking or multiplier, ``targets``); stop ("target")
   when its CI is at most ``target_width`` wide or a ranking is decided;
4. plan (``analysis.adaptive.plan_next``, at most ``batch`` runs within the budget left),
   record the round (``record``); stop ("budget") when nothing is chosen within the budget
   left but something would be without it, ("exhausted") when nothing would shrink the CI;
   else launch the chosen runs as the study's ``adaptive`` block (``block``), wait, and
   look again (3). ``max_rounds`` caps the rounds planned by one call ("max_rounds").

Every launch is ``scalelab.sweep.run.start.launch_plan(wait=True)`` (``launch.execute``;
staged when a plan has distillation students): runs are content-hashed
and claimed, so a run that is done is never trained again, two loops on one sweep train
each run once, and a second invocation after the study ended launches nothing (it looks,
finds the target met or plans nothing new). The decisions depend only on the finished
runs' losses, so a resumed study makes the decisions the interrupted one would have.
The budget (GPU-hours, the plan's ``gpu_hours``: set ``launcher.flops_per_gpu_s``)
counts every launched run of the study, the seed design and failed runs included. On
Slurm every round waits for its jobs: run the loop in a long-lived session or a small
CPU job, as ``scalelab tune``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analysis.adaptive import TargetFit, plan_next, seed_design
from analysis.adaptive.target_fits import judge, settled_sizes
from analysis.adaptive.targets import Summary, Target
from scalelab.adaptive import record
from scalelab.adaptive.block import block_spec
from scalelab.adaptive.observed import Observed, observe
from scalelab.adaptive.study import GPU_HOURS, Study, load_study
from scalelab.errors import UserError
from scalelab.store.layout import PLAN_FILE
from scalelab.sweep.plan.datasets import dataset_facts
from scalelab.sweep.run.launch import DiskPlan, plan_from_disk, sweep_dir_for
from scalelab.sweep.run.start import launch_plan, start_sweep
from scalelab.sweep.spec.load import load_spec
from scalelab.sweep.view.collect import collect

__all__ = ["AdaptiveSweep", "check_budget", "run_adaptive_sweep", "stop_reason"]


@dataclass(frozen=True)
class AdaptiveSweep:
    """What one call of ``run_adaptive_sweep`` did and where the study stands."""

    sweep_dir: Path
    stopped: str
    """"target", "budget", "exhausted" or "max_rounds"."""
    summary: Summary
    """The target on every finished run of the study."""
    fits: dict[str, TargetFit]
    """Each recipe's fit of E."""
    spent: float
    budget: float
    unit: str
    runs: int
    """Finished runs of the study."""
    rounds: int
    """Rounds planned by this call."""
    launched: tuple[str, ...] = field(default_factory=tuple)
    """Run ids this call launched (relaunches included)."""

    @property
    def fit(self) -> TargetFit:
        """The fit of the target's first recipe (the only one of an E target)."""
        return next(iter(self.fits.values()))

    def lines(self) -> list[str]:
        from scalelab.adaptive.targets import summary_text

        where = summary_text(self.summary, self.fits)
        head = (f"{self.sweep_dir}: adaptive study stopped ({self.stopped}) after "
                f"{self.rounds} round(s) this call, {len(self.launched)} run(s) launched")
        tail = (f"  {where}; {self.runs} runs finished, {self.spent:.4g} of {self.budget:.4g} "
                f"{self.unit} spent")
        return [head, tail]


def check_budget(study: Study, option: str = "--budget") -> None:
    """A budget in GPU-hours needs the plan's GPU-hours (a UserError otherwise)."""
    if study.cost != GPU_HOURS:
        raise study.spec.error(f"{option} is in GPU-hours: set launcher.flops_per_gpu_s "
                               "(achieved FLOP/s per GPU) or launcher.throughput_tokens_per_gpu_s",
                               "launcher")


def stop_reason(study: Study, obs: Observed, **plan_kw) -> str:
    """Why a round chose nothing: "budget" when, without the budget, it would have chosen
    runs; else "exhausted" (no candidate left that would shrink the CI)."""
    free = plan_next(study.space, obs.done, obs.pending.select(study.columns),
                     budget_left=math.inf, **plan_kw)
    return "budget" if free.chosen.height else "exhausted"


def run_adaptive_sweep(spec_path: str | Path, budget: float, *, target_width: float = 0.0,
                       batch: int = 4, root: str | Path | None = None,
                       executor: str | None = None, backend=None, target: str | None = None,
                       max_rounds: int = 100, loss: str = "final_loss", level: float = 0.95,
                       noise_sd: float = 0.02, goal: str = "regularized.E",
                       recipes: dict | None = None,
                       say: Callable[[str], None] | None = None) -> AdaptiveSweep:
    """Run (or continue) the adaptive study of the spec at ``spec_path`` (module
    docstring). ``budget``: GPU-hours for the whole study; ``target_width``: stop once the
    target's CI is at most this wide (0: run until the budget or the candidates are
    exhausted); ``goal``/``recipes``: the target and recipe filters (``targets``);
    ``executor``/``backend``/``target``: as ``launch.execute`` takes them; ``say``: gets a
    line per round."""
    if not budget > 0:
        raise UserError(f"--budget must be > 0 GPU-hours, got {budget}", key="--budget")
    if batch < 1:
        raise UserError(f"batch must be >= 1, got {batch}")
    spec = load_spec(spec_path)
    study = load_study(spec, datasets=dataset_facts(spec))
    check_budget(study)
    sweep_dir = sweep_dir_for(spec.name, root=root, launcher_root=spec.launcher.root).resolve()
    start_sweep(spec, sweep_dir)  # spec.yaml, as `scalelab sweep` writes it
    record.remember_study(sweep_dir, study)
    loop = _Loop(study, sweep_dir, budget, loss,
                 dict(executor=executor, backend=backend, target=target),
                 say or (lambda line: None), goal, recipes)
    return loop.run(target_width=target_width, batch=batch, max_rounds=max_rounds, level=level,
                    noise_sd=noise_sd)


@dataclass
class _Loop:
    """One call's state: the study, where it runs, and the run ids this call launched."""

    study: Study
    sweep_dir: Path
    budget: float
    loss: str
    launch_kw: dict
    say: Callable[[str], None]
    goal: str = "regularized.E"
    recipes: dict | None = None
    launched: list[str] = field(default_factory=list)
    runs: object = None
    """The runs table of the last look (a multiplier refits its data law on it)."""

    def target(self, level: float) -> Target:
        """The study's target; a multiplier's data law is refitted on the runs seen now."""
        from scalelab.adaptive.targets import build_target

        return build_target(self.study, self.goal, filters=self.recipes, runs=self.runs,
                            level=level)

    def observe(self) -> Observed:
        self.runs = collect(self.sweep_dir) if (self.sweep_dir / PLAN_FILE).exists() else None
        return observe(self.study, self.runs, loss=self.loss)

    def launch(self, plan) -> None:
        report = launch_plan(plan, self.sweep_dir, self.study.spec.launcher, wait=True,
                             **self.launch_kw)
        self.launched += report.launched

    def launch_runs(self, run_ids: Sequence[str]) -> None:
        self.launch(block_spec(self.study, run_ids).plan)

    def resume(self, run_ids: Sequence[str]) -> None:
        disk = plan_from_disk(self.sweep_dir)
        keep = [i for i, r in enumerate(disk.table["run_id"].to_list()) if r in set(run_ids)]
        if keep:
            self.say(f"resuming {len(keep)} run(s) launched before")
            self.launch(DiskPlan(disk.table[keep], [disk.configs[i] for i in keep],
                                 [disk.launchers[i] for i in keep]))

    def start(self, level: float) -> Observed:
        """Relaunch unfinished runs; a study with nothing launched gets its seed design."""
        study, space = self.study, self.study.space
        obs = self.observe()
        self.target(level)  # a bad --target or --recipe: one line before anything launches
        if obs.resumable:
            self.resume(obs.resumable)
            obs = self.observe()
        if obs.launched.height:
            return obs
        seed = seed_design(space, study.cost_of)
        if (cost := float(seed["flops"].sum())) > self.budget:
            raise UserError(f"the seed design ({seed.height} runs) needs {cost:.4g} "
                            f"{study.unit}, over the budget {self.budget:.4g}", key="--budget")
        summary, _ = judge(self.target(level), obs.done)
        frame = record.round_frame(0, record.seed_table(seed), math.nan, study, summary, 0.0,
                                   self.budget)
        record.write_round(self.sweep_dir, 0, frame)
        self.say(f"round 0: the seed design, {seed.height} runs")
        self.launch_runs(study.run_ids(seed["key"].to_list()))
        return self.observe()

    def run(self, *, target_width: float, batch: int, max_rounds: int, level: float,
            noise_sd: float) -> AdaptiveSweep:
        study, space = self.study, self.study.space
        obs = self.start(level)
        rounds = 0
        while True:  # one look at the target per pass
            target = self.target(level)
            summary, fits = judge(target, obs.done)
            index = record.next_round(self.sweep_dir)
            stopped = ("target" if summary.met(target_width)
                       else "max_rounds" if rounds >= max_rounds else None)
            if stopped is None:
                left = self.budget - obs.spent
                plan = plan_next(space, obs.done, obs.pending.select(study.columns), batch=batch,
                                 budget_left=left, noise_sd=noise_sd, level=level, target=target)
                record.write_round(self.sweep_dir, index, record.round_frame(
                    index, plan.table, plan.width, study, summary, obs.spent, self.budget))
                rounds += 1
                if plan.chosen.height == 0:
                    stopped = stop_reason(study, obs, batch=batch, noise_sd=noise_sd, level=level,
                                          target=target)
            record.append_trajectory(self.sweep_dir, index - 1, obs.done.height, obs.spent,
                                     study.unit, summary, settled_sizes(fits),
                                     stopped)
            if stopped is not None:
                return AdaptiveSweep(self.sweep_dir, stopped, summary, fits, obs.spent, self.budget,
                                     study.unit, obs.done.height, rounds, tuple(self.launched))
            actions = ", ".join(plan.chosen["action"].unique(maintain_order=True))
            self.say(f"round {index}: width {summary.width:.4g}, launching {plan.chosen.height} "
                     f"run(s) ({actions})")
            self.launch_runs(study.run_ids(plan.chosen["key"].to_list()))
            obs = self.observe()
