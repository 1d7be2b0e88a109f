"""``scalelab tune SPEC``: an Optuna study, or Kim et al.'s certified coordinate search.

Trials are ordinary runs: each trial is the spec with some keys pinned (Optuna: the
sampled ``tune.space`` values; coordinate: a grid point and a cell of the other axes),
expanded by ``plan.expand`` (so seeds, members and derive rules still apply; a trial's
value is the mean objective over its runs) and launched through the sweep machinery
(``start.launch_plan``) into ``<root>/<name>-tune/``, which is a sweep directory like any
other (``status``, ``collect`` work on it). Runs are content-addressed, so a repeated
point, a re-run of ``tune`` or a duplicate Optuna suggestion never trains twice.

Optuna state lives in ``optuna.journal`` in that directory (JournalFileBackend: safe on
NFS). Re-running continues the study until ``n_trials`` trials have finished; trials
left RUNNING by a killed process are marked FAIL and their parameters re-queued (their
runs resume or are found complete). Run one ``tune`` process per study.

The coordinate search is deterministic given the losses, so re-running it replays the
walk over the runs already trained and continues where it stopped.

``progress``: a callable that gets a ``TrialProgress`` before the first round and after
each: trials finished of the total (Optuna: ``n_trials``; coordinate: points trained, the
total unknown until every walk ends) and the best value so far with its parameters
(rendered by ``scalelab.cli.progress``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from scalelab.sweep.plan.datasets import DatasetFacts
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.spec import keys
from scalelab.sweep.spec.load import Spec
from scalelab.tune.coordinate import CoordinateResult, CoordinateSearch

__all__ = [
    "JOURNAL",
    "Runner",
    "TrialProgress",
    "TuneReport",
    "execute_runner",
    "objective_values",
    "trial_spec",
    "tune",
]

JOURNAL = "optuna.journal"

Runner = Callable[[Plan], Mapping[str, float | None]]
"""Trains the plan's runs that are not done and returns run_id -> objective for every run
(None: failed or no eval; +inf: diverged)."""


@dataclass(frozen=True)
class TrialProgress:
    """``done`` trials finished of ``total`` (None: not known yet) of a ``method`` study,
    and the best objective so far (None: no trial finished yet) at ``best_params``
    (the ``analysis.progress.Progress`` protocol)."""

    method: str
    done: int
    total: int | None
    best_value: float | None
    best_params: Mapping[str, Any]
    task: ClassVar[str] = "tune"
    label: ClassVar[str] = "tune"

    @property
    def final(self) -> bool:
        return self.total is not None and self.done >= self.total

    @property
    def detail(self) -> str:
        if self.best_value is None:
            return "no trial finished yet"
        where = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in self.best_params.items())
        return f"best {self.best_value:.6g}" + (f" at {where}" if where else "")

    def line(self) -> str:
        shown = "?" if self.total is None else self.total
        return f"tune ({self.method}): {self.done}/{shown} trials, {self.detail}"


TuneProgress = Callable[[TrialProgress], None]


@dataclass
class TuneReport:
    """What a ``tune`` call found."""

    method: str
    plan: Plan | None
    """Every run the study asked for (None before the first trial)."""
    best_params: dict[str, Any] = field(default_factory=dict)
    best_value: float | None = None
    trials: pl.DataFrame | None = None
    """Optuna: number, state, value, params..., run_ids."""
    searches: list[tuple[dict[str, Any], CoordinateResult]] = field(default_factory=list)
    """Coordinate: (cell of the other axes, result) per search."""

    def lines(self) -> list[str]:
        if self.method == "optuna":
            n = 0 if self.trials is None else self.trials.height
            runs = len(self.plan) if self.plan is not None else 0
            return [f"{n} trials, {runs} runs; best value {self.best_value} at "
                    + ", ".join(f"{k}={v}" for k, v in self.best_params.items())]
        out = []
        for cell, res in self.searches:
            where = ", ".join(f"{k}={v}" for k, v in cell.items()) or "all"
            status = "certified" if res.certified else "NOT certified: " + "; ".join(res.flags)
            out.append(f"[{where}] best {res.best} loss {res.loss:.6g} after "
                       f"{len(res.evaluated)} runs, {len(res.path) - 1} moves; {status}")
        return out


def objective_values(frame: pl.DataFrame, metric: str) -> dict[str, float | None]:
    """run_id -> objective from a ``collect`` table: ``metric`` of COMPLETED runs, +inf for
    DIVERGED, None otherwise."""
    out: dict[str, float | None] = {}
    for rid, state, value in frame.select("run_id", "state", metric).iter_rows():
        if state == "DIVERGED":
            out[rid] = math.inf
        elif state == "COMPLETED" and value is not None and not math.isnan(value):
            out[rid] = float(value)
        else:
            out[rid] = None
    return out


def execute_runner(sweep_dir: Path, spec: Spec, *, executor: str | None = None,
                   target: str | None = None, progress: bool = True) -> Runner:
    """The default runner: ``start.launch_plan(wait=True)`` (``launch.execute``, staged
    when the trial's plan has distillation students) then ``collect``."""
    from scalelab.sweep.run.start import launch_plan
    from scalelab.sweep.view.collect import collect

    metric = spec.tune.objective if spec.tune else "final_loss"

    def run(plan: Plan) -> dict[str, float | None]:
        launch_plan(plan, sweep_dir, spec.launcher, wait=True, executor=executor,
                    progress=progress, target=target)
        return objective_values(collect(sweep_dir), metric)

    return run


def trial_spec(spec: Spec, pinned: Mapping[str, Any]) -> Spec:
    """``spec`` with ``pinned`` keys fixed (one-value grid axes, so run names show them);
    grid/zip keys not pinned keep varying."""
    grid = {k: (v,) for k, v in pinned.items()}
    grid.update({k: v for k, v in spec.grid.items() if k not in pinned})
    zips = tuple(g for g in spec.zip if not set(g) & set(pinned))
    return dataclasses.replace(spec, grid=grid, zip=zips, blocks=())  # blocks are not tuned


def tune(spec: Spec, sweep_dir: str | Path, *, runner: Runner | None = None,
         datasets: Mapping[tuple[str, int], DatasetFacts] | None = None,
         n_trials: int | None = None, progress: TuneProgress | None = None) -> TuneReport:
    """Run (or continue) the study described by ``spec.tune``; ``progress``: see the
    module docstring."""
    if spec.tune is None:
        raise spec.error("no tune: section (method, objective, space or axes)", None)
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    runner = runner or execute_runner(sweep_dir, spec)
    book = _Book(spec, datasets or {})
    if spec.tune.method == "coordinate":
        return _coordinate(spec, book, runner, progress)
    return _optuna(spec, sweep_dir, book, runner, n_trials or spec.tune.n_trials, progress)


class _Book:
    """The growing plan of every run the study asked for (what execute() gets)."""

    def __init__(self, spec: Spec, datasets):
        self.spec, self.datasets = spec, datasets
        self.plans: list[Plan] = []
        self.ids: set[str] = set()
        self.configs: list = []
        self.derived: list = []
        self.launchers: list = []
        self.tables: list[pl.DataFrame] = []

    def add(self, pinned: Mapping[str, Any]) -> list[str]:
        """Expand one trial; returns its run ids."""
        pinned = {k: keys.coerce_value(k, v, path=f"tune.{k}") for k, v in pinned.items()}
        plan = expand(trial_spec(self.spec, pinned), datasets=self.datasets)
        ids = plan.table["run_id"].to_list()
        fresh = [i for i, rid in enumerate(ids) if rid not in self.ids]
        if fresh:
            self.ids.update(ids[i] for i in fresh)
            self.configs += [plan.configs[i] for i in fresh]
            self.derived += [plan.derived[i] for i in fresh]
            self.launchers += [plan.launchers[i] for i in fresh]
            self.tables.append(plan.table[fresh])
        return ids

    def plan(self) -> Plan:
        table = pl.concat(self.tables, how="diagonal_relaxed")
        axes = tuple(c for c in table.columns if "." in c or c == "seed")
        return Plan(spec=self.spec, configs=list(self.configs), table=table,
                    derived=list(self.derived), axes=axes, launchers=list(self.launchers))


def _mean(ids: Sequence[str], values: Mapping[str, float | None]) -> float | None:
    got = [values.get(rid) for rid in ids]
    if not got or any(v is None for v in got):
        return None
    return sum(got) / len(got)


# --- Kim et al.'s certified coordinate search ---------------------------------------------
def _coordinate(spec: Spec, book: _Book, runner: Runner, tell: TuneProgress | None) -> TuneReport:
    t = spec.tune
    grids = [sorted(spec.grid[a]) for a in t.axes]
    start = [t.start.get(a, g[(len(g) - 1) // 2]) for a, g in zip(t.axes, grids)]
    sign = -1.0 if t.direction == "maximize" else 1.0
    searches = [(cell, CoordinateSearch(grids, start, axes=t.axes, max_evals=t.max_evals, ridge=t.ridge))
                for cell in _cells(spec, set(t.axes))]
    values: Mapping[str, float | None] = {}
    while True:
        asks = [(cell, s, p) for cell, s in searches for p in s.pending()]
        if tell is not None:
            tell(_coordinate_progress(t.axes, searches, sign, finished=not asks))
        if not asks:
            break
        run_ids = [book.add({**cell, **dict(zip(t.axes, p))}) for cell, _, p in asks]
        values = runner(book.plan())
        for (_cell, search, point), ids in zip(asks, run_ids):
            loss = _mean(ids, values)
            search.tell({point: None if loss is None else sign * loss})
    results = [(cell, s.result()) for cell, s in searches]
    best_cell, best = min(results, key=lambda r: r[1].loss) if results else ({}, None)
    return TuneReport(method="coordinate", plan=book.plan() if book.tables else None,
                      best_params={**best_cell, **dict(zip(t.axes, best.best))} if best else {},
                      best_value=None if best is None else sign * best.loss, searches=results)


def _coordinate_progress(axes: Sequence[str], searches: Sequence[tuple[dict, CoordinateSearch]],
                         sign: float, finished: bool) -> TrialProgress:
    """Points trained over all walks, and the best centre so far (its cell and point)."""
    done = sum(len(s.losses) for _, s in searches)
    best: tuple[float, dict[str, Any]] | None = None
    for cell, s in searches:
        loss = s.losses.get(s.centre)
        if loss is not None and math.isfinite(loss) and (best is None or loss < best[0]):
            point = (g[i] for g, i in zip(s.grids, s.centre))
            best = (loss, {**cell, **dict(zip(axes, point))})
    return TrialProgress("coordinate", done, done if finished else None,
                         None if best is None else sign * best[0], {} if best is None else best[1])


def _cells(spec: Spec, axes: set[str]) -> list[dict[str, Any]]:
    """Every combination of the grid keys and zip groups that are not coordinate axes."""
    parts: list[list[dict[str, Any]]] = [[{k: v} for v in vals]
                                         for k, vals in spec.grid.items() if k not in axes]
    for group in spec.zip:
        parts.append([dict(zip(group, row)) for row in zip(*group.values())])
    return [dict(itertools.chain.from_iterable(d.items() for d in combo))
            for combo in itertools.product(*parts)]


# --- Optuna ---------------------------------------------------------------------------------
def _optuna(spec: Spec, sweep_dir: Path, book: _Book, runner: Runner, n_trials: int,
            tell: TuneProgress | None) -> TuneReport:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t = spec.tune
    sampler = (optuna.samplers.RandomSampler(seed=t.sampler_seed) if t.sampler == "random"
               else optuna.samplers.TPESampler(seed=t.sampler_seed))
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / JOURNAL)))
    study = optuna.create_study(study_name=spec.name, storage=storage, sampler=sampler,
                                direction=t.direction, load_if_exists=True)
    for old in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        storage.set_trial_user_attr(old._trial_id, "stale", True)
        study.tell(old.number, state=TrialState.FAIL)  # its process died; retry its point
        study.enqueue_trial(old.params, skip_if_exists=False)
    for old in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        book.add(old.params)

    def finished() -> int:
        return sum(1 for tr in study.get_trials(deepcopy=False)
                   if tr.state in (TrialState.COMPLETE, TrialState.FAIL)
                   and not tr.user_attrs.get("stale"))

    def report() -> None:
        if tell is None:
            return
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        best = study.best_trial if complete else None
        tell(TrialProgress("optuna", finished(), n_trials, best.value if best else None,
                           dict(best.params) if best else {}))

    report()
    while (left := n_trials - finished()) > 0:
        batch = [study.ask() for _ in range(min(t.parallel, left))]
        asked = []
        for trial in batch:
            params = {k: _suggest(trial, k, p) for k, p in t.space.items()}
            ids = book.add(params)
            trial.set_user_attr("run_ids", ids)
            asked.append((trial, ids))
        values = runner(book.plan())
        for trial, ids in asked:
            value = _mean(ids, values)
            if value is None:
                study.tell(trial, state=TrialState.FAIL)
            else:
                study.tell(trial, value)
        report()
    return _optuna_report(spec, study, book)


def _suggest(trial, key: str, p) -> Any:
    if p.choices is not None:
        return trial.suggest_categorical(key, list(p.choices))
    if keys.is_int(key):
        return trial.suggest_int(key, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
    return trial.suggest_float(key, p.low, p.high, step=p.step, log=p.log)


def _optuna_report(spec: Spec, study, book: _Book) -> TuneReport:
    from optuna.trial import TrialState

    rows = []
    for tr in study.get_trials(deepcopy=False):
        rows.append({"number": tr.number, "state": tr.state.name, "value": tr.value,
                     **{f"params.{k}": v for k, v in tr.params.items()},
                     "run_ids": list(tr.user_attrs.get("run_ids", []))})
    complete = [tr for tr in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    best = study.best_trial if complete else None
    return TuneReport(method="optuna", plan=book.plan() if book.tables else None,
                      best_params=dict(best.params) if best else {},
                      best_value=best.value if best else None,
                      trials=pl.DataFrame(rows, strict=False))
