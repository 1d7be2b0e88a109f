"""Launch a plan idempotently: diff against disk, claim, submit.

``decide`` says, for every run of the plan, launch or skip and why, from what is on
disk (status.json, claims) and one scheduler poll. ``execute`` then claims each run it
launches with an atomic per-run claim (``scalelab.sweep.run.lock``), re-reads the run's
status under the claim (a concurrent launch may have finished it meanwhile), and hands
the claimed runs to a backend. Two launches of one sweep at the same time therefore
execute each run exactly once, and a relaunch after everything finished submits nothing.
With ``executor: auto``, every launch says on stderr which backend it chose and why
(``backends.ExecutorChoice.line``), and so when a CPU-only sweep goes to Slurm.
Each run goes out with its own launcher (``Plan.launchers``); runs whose launchers submit
differently are handed to the backend as separate groups, i.e. separate job arrays on
Slurm (``scalelab.sweep.plan.resources.groups``).

Run directories hold data, never instructions: they sit on shared filesystems where more
people can write than can edit the spec. ``plan_from_disk`` (what ``retry`` and a resumed
adaptive study relaunch) re-derives each run's config and launcher (environment, setup
lines, resources) from the spec, by default the sweep's ``spec.yaml`` copy expanded
through the planner, per-run launcher rules and blocks included. Nothing is read back
from a run directory but its ``config-input.yaml`` for a run the spec no longer plans
(a run of an earlier spec, a tuning trial), and only after its identity is checked
against the sweep's ``plan.parquet`` row (a mismatch is one line naming the file, exit
2); such a run gets the spec's launcher of its block (or the top-level one), without
per-run launcher rules.

Run directories on disk (``runs_on_disk``, the one place the plan's ``run_dir`` meets the
disk): a planned run whose canonical directory (``identity.run_dir_name``) does not exist
but that a directory of another name holds (``<anything>-<run id>`` whose ``config.yaml``
holds the run's full id; ``identity.adopted_dirs``) runs in that directory: ``decide``
judges it there, ``execute`` resumes it there and writes that ``run_dir`` to
plan.parquet, which ``status``, ``collect`` and ``retry`` read.

Launch rules (a plain ``scalelab sweep``):
  new -> launch; COMPLETED, DIVERGED -> skip; held by a live claim -> skip;
  PREEMPTED, TIMEOUT (and RUNNING runs nobody executes) -> launch, resuming the checkpoint;
  FAILED, CANCELLED -> skip unless ``retry_failed``.
``retry`` (``retry_failed``/``retry_preempted``) relaunches only runs in those states.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from scalelab import strict
from scalelab.errors import UserError
from scalelab.store.atomic import write_yaml_atomic
from scalelab.store.layout import BLOCK_COLUMN, DEFAULT_ROOT, PLAN_FILE, RUNS_FOLDER, SPEC_FILE
from scalelab.store.status import (
    CorruptStatus,
    State,
    read_status,
    set_aside_corrupt,
    update_status,
)
from scalelab.store.sweep_files import (
    read_sweep_file,
    read_sweep_text,
    sweep_lock,
    write_sweep_table,
)
from scalelab.sweep.plan.resources import groups, launchers_of
from scalelab.sweep.run.backends import Backend, Handle, Hooks, backend_for, choose_executor
from scalelab.sweep.run.job import CONFIG_INPUT, DEFAULT_TARGET, JobSpec
from scalelab.sweep.run.lock import Claim, refresh, release, try_claim
from scalelab.sweep.run.observe import RunView, observe
from scalelab.sweep.run.order import longest_first
from scalelab.sweep.spec.sections import LauncherConfig

__all__ = [
    "PLAN_FILE",
    "SPEC_COPY",
    "DiskPlan",
    "LaunchReport",
    "cpu_only",
    "decide",
    "execute",
    "plan_from_disk",
    "read_plan",
    "runs_on_disk",
    "sweep_and_spec",
    "sweep_dir_for",
    "sweep_dir_of",
    "sweep_spec",
    "write_plan",
]

SPEC_COPY = SPEC_FILE
"""The sweep's copy of the spec last launched into it (``scalelab sweep`` writes it)."""


def sweep_dir_for(name: str, *, root: str | Path | None = None, launcher_root: str | None = None) -> Path:
    """``<root>/<name>``: root from the argument, else $SCALELAB_ROOT, else the spec's
    ``launcher.root``, else ./runs."""
    base = root or os.environ.get("SCALELAB_ROOT") or launcher_root or DEFAULT_ROOT
    return Path(base) / name


def sweep_dir_of(path: str | Path, root: str | Path | None = None) -> Path:
    """A sweep directory, given it or the spec file that made it (``sweep_dir_for``)."""
    return sweep_and_spec(path, root)[0]


def sweep_and_spec(path: str | Path, root: str | Path | None = None) -> tuple[Path, Any]:
    """(sweep directory, the spec loaded) given a spec file; (``path``, None) given a
    sweep directory."""
    path = Path(path)
    if path.is_file():
        from scalelab.sweep.spec.load import load_spec

        spec = load_spec(path)
        return sweep_dir_for(spec.name, root=root, launcher_root=spec.launcher.root), spec
    if not path.is_dir():
        raise UserError(f"{path}: no such sweep directory or spec file")
    return path, None


def read_plan(sweep_dir: str | Path) -> pl.DataFrame:
    """``<sweep>/plan.parquet``; a UserError when the folder is not a sweep."""
    path = Path(sweep_dir) / PLAN_FILE
    if not path.exists():
        raise UserError(f"{sweep_dir}: not a sweep directory (no {PLAN_FILE}; run `scalelab sweep SPEC` first)")
    return read_sweep_file(path)


def write_plan(table: pl.DataFrame, sweep_dir: Path) -> None:
    """Merge ``table`` into ``<sweep>/plan.parquet`` (rows of earlier plans are kept),
    then write its manifest (``store.sweep_files``), under the sweep directory's lock. A
    plan that fails its manifest (or does not decode) is written again from ``table``
    alone, with one line on stderr: its rows cannot be trusted, and the runs already done
    keep their directories (a run id is the hash of its config)."""
    path = sweep_dir / PLAN_FILE
    with sweep_lock(sweep_dir):
        if os.path.lexists(path):
            try:
                old = read_sweep_file(path)
            except UserError as err:
                print(f"note: {err}; writing {PLAN_FILE} again from this spec's "
                      f"{table.height} runs", file=sys.stderr, flush=True)
            else:
                table = pl.concat([old, table], how="diagonal_relaxed").unique(
                    "run_id", keep="last", maintain_order=True)
        write_sweep_table(path, table, locked=True)


def _rule(view: RunView, retry_failed: bool, retry_preempted: bool) -> tuple[str, str]:
    retry = retry_failed or retry_preempted
    state = view.state
    if view.corrupt and not view.live:
        return ("launch", f"retry ({view.corrupt})") if retry_failed else \
            ("skip", f"{view.corrupt} (retry --failed sets it aside and reruns the run)")
    if state in (State.COMPLETED.value, State.DIVERGED.value):
        return "skip", state.lower()
    if view.live:
        claim = view.claim
        who = (f"job {view.job_id}" if claim is None or claim.job_id else f"pid {claim.pid} on {claim.host}")
        return "skip", f"{state.lower()}: claimed by {who}"
    if state is None:
        return ("skip", "not started (retry only reruns failed/preempted runs)") if retry else ("launch", "new")
    if state in (State.FAILED.value, State.CANCELLED.value):
        if retry_failed:
            return "launch", f"retry ({state.lower()})"
        return "skip", f"{state.lower()} (retry --failed reruns it)"
    if state in (State.PREEMPTED.value, State.TIMEOUT.value):
        if retry and not retry_preempted:
            return "skip", f"{state.lower()} (retry --preempted resumes it)"
        return "launch", f"resume ({view.note or state.lower()})"
    return "skip", f"{state.lower()}"


def _table(plan: Any) -> pl.DataFrame:
    return plan.table if hasattr(plan, "table") else plan


def runs_on_disk(plan: Any, sweep_dir: str | Path) -> pl.DataFrame:
    """The plan's table with each ``run_dir`` where the run is on disk: the canonical
    directory, or the differently named one that holds the run (``identity.adopted_dirs``,
    module docstring). A bare table (no ``configs``: plan.parquet's rows, already
    resolved when launched) is returned as it is."""
    table = _table(plan)
    configs = getattr(plan, "configs", None)
    if configs is None or table.is_empty():
        return table
    from scalelab.identity import adopted_dirs, full_id

    prefix = f"{RUNS_FOLDER}/"
    dirs = table["run_dir"].to_list()
    rows = [i for i, d in enumerate(dirs) if d.startswith(prefix) and "/" not in d[len(prefix):]]
    found = adopted_dirs(Path(sweep_dir) / RUNS_FOLDER, [dirs[i][len(prefix):] for i in rows],
                         lambda k: full_id(configs[rows[k]]))
    for i, name in zip(rows, found):
        dirs[i] = prefix + name
    return table.with_columns(pl.Series("run_dir", dirs, dtype=pl.String))


def decide(plan: Any, sweep_dir: str | Path, *, retry_failed: bool = False,
           retry_preempted: bool = False, views: Sequence[RunView] | None = None) -> pl.DataFrame:
    """One row per plan row: run_id, name, run_dir (where the run is on disk:
    ``runs_on_disk``), state, action ('launch'|'skip'), reason. ``views``: the rows'
    directories observed already (``execute``, whose table is resolved)."""
    table = _table(plan)
    sweep_dir = Path(sweep_dir)
    if views is None:
        table = runs_on_disk(plan, sweep_dir)
        views = observe(sweep_dir / d for d in table["run_dir"])
    rows = [_rule(v, retry_failed, retry_preempted) for v in views]
    return pl.DataFrame({
        "run_id": table["run_id"],
        "name": table["name"],
        "run_dir": table["run_dir"],
        "state": pl.Series([v.state for v in views], dtype=pl.String),
        "action": [a for a, _ in rows],
        "reason": [r for _, r in rows],
    })


class ReportCounts:
    """``launched`` and ``skipped`` of a report that has ``handles`` and ``decisions``."""

    @property
    def launched(self) -> list[str]:
        return [h.run_id for h in self.handles]

    @property
    def skipped(self) -> int:
        return self.decisions.height - len(self.handles)


@dataclass
class LaunchReport(ReportCounts):
    """What ``execute`` did."""

    sweep_dir: Path
    backend: str
    decisions: pl.DataFrame
    """``decide``'s table, updated with the outcome of claiming."""
    handles: list[Handle] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    """run_id -> final state, for the runs waited on."""


class _ClaimHooks(Hooks):
    """Keeps the launcher's claims current while a blocking backend executes them."""

    def __init__(self, claims: dict[str, tuple[Path, Claim]]) -> None:
        self.claims = claims

    def started(self, handle: Handle, pid: int | None) -> None:
        run_dir, claim = self.claims[handle.run_id]
        self.claims[handle.run_id] = (run_dir, refresh(run_dir, claim, worker_pid=pid))

    def finished(self, handle: Handle, state: str) -> None:
        run_dir, claim = self.claims.pop(handle.run_id, (None, None))
        if claim is not None:
            release(run_dir, claim)

    def tick(self) -> None:
        for run_id, (run_dir, claim) in list(self.claims.items()):
            self.claims[run_id] = (run_dir, refresh(run_dir, claim))


def _persist_verdicts(views: Sequence[RunView]) -> list[RunView]:
    """Write scheduler verdicts (e.g. CANCELLED) into status.json and drop stale claims;
    returns the views as they now are on disk."""
    out = []
    for v in views:
        if v.note.startswith("scheduler:") and v.disk_state != v.state:
            v = replace(v, status=update_status(v.run_dir, State(v.state), scheduler_state=v.sched))
        if v.claim is not None and not v.live and v.state != State.RUNNING.value:
            release(v.run_dir, v.claim)
            v = replace(v, claim=None)
        out.append(v)
    return out


def execute(plan: Any, sweep_dir: str | Path, launcher: Any, *, wait: bool,
            retry_failed: bool = False, retry_preempted: bool = False,
            executor: str | None = None, backend: Backend | None = None,
            target: str = DEFAULT_TARGET, progress: bool = True) -> LaunchReport:
    """Launch the plan's runs that need it; skip the rest (see the module docstring).

    ``plan`` has ``.table`` (plan.parquet's rows, with ``run_id``, ``name``, ``run_dir``
    relative to the sweep), ``.configs`` (one RunConfig per row) and optionally
    ``.launchers`` (one per row; ``launcher`` otherwise). ``launcher`` also picks the
    backend. Each run goes to the directory that holds it (``runs_on_disk``). On Slurm
    with ``wait=False`` this returns once the jobs are queued.
    """
    sweep_dir = Path(sweep_dir).resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    table = runs_on_disk(plan, sweep_dir)
    configs = list(plan.configs)
    launchers = launchers_of(plan, launcher)
    write_plan(table, sweep_dir)
    backend = backend or _chosen_backend(launcher, sweep_dir, executor, configs, progress=progress)
    views = _persist_verdicts(observe(sweep_dir / d for d in table["run_dir"]))
    decisions = decide(table, sweep_dir, retry_failed=retry_failed,
                       retry_preempted=retry_preempted, views=views)

    claims: dict[str, tuple[Path, Claim]] = {}
    jobs: list[JobSpec] = []
    job_launchers: list[LauncherConfig] = []
    actions, reasons = decisions["action"].to_list(), decisions["reason"].to_list()
    for i, row in enumerate(decisions.iter_rows(named=True)):
        if row["action"] != "launch":
            continue
        run_dir = sweep_dir / row["run_dir"]
        # alive_jobs=None: a job-id claim here is newer than our poll (stale ones were
        # dropped above), i.e. a concurrent launch's submission: never break it
        claim = try_claim(run_dir, backend=backend.name, alive_jobs=None)
        if claim is None:
            actions[i], reasons[i] = "skip", "claimed by a concurrent launch"
            continue
        now = _status_now(run_dir, views[i])
        before = views[i].status
        if now != before:
            release(run_dir, claim)  # someone ran it between our look and our claim
            actions[i], reasons[i] = "skip", f"changed meanwhile ({(now or {}).get('state', '?').lower()})"
            continue
        write_yaml_atomic(run_dir / CONFIG_INPUT, strict.to_dict(configs[i]))
        claims[row["run_id"]] = (run_dir, claim)
        jobs.append(JobSpec(row["run_id"], row["name"], str(run_dir), target))
        job_launchers.append(launchers[i])
    decisions = decisions.with_columns(pl.Series("action", actions), pl.Series("reason", reasons))
    report = LaunchReport(sweep_dir, backend.name, decisions)
    first = _longest_first(table, [j.run_id for j in jobs], job_launchers)
    jobs, job_launchers = [jobs[i] for i in first], [job_launchers[i] for i in first]

    try:
        report.handles = _submit_grouped(backend, jobs, job_launchers)
    except BaseException as err:
        queued = {h.run_id: h for h in getattr(err, "handles", [])}  # SubmitError: some went out
        for run_id, (run_dir, claim) in claims.items():
            if run_id in queued:
                refresh(run_dir, claim, job_id=queued[run_id].job_id)
            else:
                release(run_dir, claim)
        raise
    if backend.returns_at_once:
        for h in report.handles:
            run_dir, claim = claims[h.run_id]
            claims[h.run_id] = (run_dir, refresh(run_dir, claim, job_id=h.job_id))
        if not wait:
            return report
        report.results = backend.wait(report.handles)
        return report
    report.results = backend.wait(report.handles, _ClaimHooks(claims))
    return report


def _status_now(run_dir: Path, view: RunView) -> dict | None:
    """status.json under our claim. A corrupt one the view judged is set aside (one line
    on stderr): the relaunch starts from no status; one corrupted since reads as changed."""
    if view.corrupt:
        return set_aside_corrupt(run_dir)
    try:
        return read_status(run_dir)
    except CorruptStatus:
        return {"state": "corrupt"}


def _chosen_backend(launcher: Any, sweep_dir: Path, executor: str | None, configs: Sequence[Any], *,
                    progress: bool) -> Backend:
    """The backend for ``executor`` (else ``launcher.executor``); when ``auto`` chose it,
    one line on stderr says which and why (and when a CPU-only sweep goes to Slurm)."""
    choice = choose_executor(executor or launcher.executor)
    line = choice.line(cpu_only=cpu_only(configs))
    if line:
        print(line, file=sys.stderr, flush=True)
    return backend_for(choice, launcher, sweep_dir, progress=progress)


def cpu_only(configs: Sequence[Any]) -> bool:
    """Whether every run (a ``RunConfig``) trains with ``train.device: cpu`` (False for none)."""
    return bool(configs) and all(str(c.train.device).lower() == "cpu" for c in configs)


def _longest_first(table: pl.DataFrame, run_ids: list[str], launchers: list) -> list[int]:
    """The launch order of ``run_ids``: each submission group (``resources.groups``, in
    order of first appearance, as they are submitted) longest run first
    (``order.longest_first``); plan order where the table has no cost columns."""
    if not run_ids or not {"steps", "flops"} <= set(table.columns):
        return list(range(len(run_ids)))
    cost = dict(zip(table["run_id"].to_list(),
                    zip(table["steps"].to_list(), table["flops"].to_list())))
    out: list[int] = []
    for _, rows in groups(launchers):
        steps, flops = zip(*(cost.get(run_ids[i], (None, None)) for i in rows))
        out += [rows[k] for k in longest_first(steps, flops)]
    return out


def _submit_grouped(backend: Backend, jobs: list[JobSpec], launchers: list) -> list[Handle]:
    """One ``submit`` per resource group; a failure carries the handles queued before it
    (``err.handles``), as a backend's own ``SubmitError`` does."""
    handles: list[Handle] = []
    for launcher, rows in groups(launchers):
        try:
            handles += backend.submit([jobs[i] for i in rows], launcher)
        except BaseException as err:
            err.handles = handles + list(getattr(err, "handles", []))
            raise
    return handles


@dataclass(frozen=True)
class DiskPlan:
    """The runs of a sweep as launched before: plan.parquet rows that have a
    ``config-input.yaml`` (what ``retry`` relaunches), each with its config and launcher
    re-derived from the spec (module docstring; None: the launch's default launcher)."""

    table: pl.DataFrame
    configs: list
    launchers: list


def plan_from_disk(sweep_dir: str | Path, spec: Any = None) -> DiskPlan:
    """The runs of the sweep launched before, re-derived from ``spec`` (a loaded ``Spec``;
    default the sweep's ``spec.yaml`` copy; none there: configs from the verified
    ``config-input.yaml`` files and the launch's default launcher). Module docstring."""
    sweep_dir = Path(sweep_dir)
    table = read_plan(sweep_dir)
    keep = [(sweep_dir / d / CONFIG_INPUT).exists() for d in table["run_dir"]]
    table = table.filter(pl.Series(keep, dtype=pl.Boolean))
    spec = spec if spec is not None else sweep_spec(sweep_dir)
    planned = _planned(spec) if spec is not None else {}
    configs, launchers = [], []
    for row in table.iter_rows(named=True):
        cfg, launcher = planned.get(row["run_id"]) or (_verified_config(sweep_dir, row),
                                                       _block_launcher(spec, row.get(BLOCK_COLUMN)))
        configs.append(replace(cfg, name=row["name"]))  # the name the run was launched under
        launchers.append(launcher)
    return DiskPlan(table, configs, launchers)


def sweep_spec(sweep_dir: str | Path) -> Any:
    """The sweep's ``spec.yaml`` copy, checked against its manifest and loaded; None when
    it has none."""
    path = Path(sweep_dir) / SPEC_COPY
    if not os.path.lexists(path):
        return None
    text = read_sweep_text(path)
    if text is None:
        return None
    from scalelab.sweep.spec.load import parse_spec

    return parse_spec(text, file=str(path))


def _planned(spec: Any) -> dict[str, tuple[Any, LauncherConfig]]:
    """run_id -> (config, launcher) of every run ``spec`` plans (dataset facts and all)."""
    from scalelab.sweep.plan.datasets import dataset_facts
    from scalelab.sweep.plan.expand import expand

    plan = expand(spec, datasets=dataset_facts(spec))
    return dict(zip(plan.table["run_id"].to_list(),
                    zip(plan.configs, launchers_of(plan, spec.launcher), strict=True), strict=True))


def _block_launcher(spec: Any, block: str | None) -> LauncherConfig | None:
    """The launcher of ``block`` in ``spec`` (the top level's when the spec has no such
    block); None without a spec."""
    if spec is None:
        return None
    return dict(spec.blocks).get(block, spec).launcher


def _verified_config(sweep_dir: Path, row: dict) -> Any:
    """The run's ``config-input.yaml``, refused (one line naming it) unless its identity is
    the plan row's run id: a planted config cannot make a directory train something else."""
    from scalelab.config import load_run_config
    from scalelab.identity import run_id

    path = sweep_dir / row["run_dir"] / CONFIG_INPUT
    cfg = load_run_config(path)
    if (found := run_id(cfg)) != row["run_id"]:
        raise UserError(f"holds run {found}, not the sweep's run {row['run_id']} "
                        f"(plan.parquet): refusing to relaunch it; restore or remove the file",
                        file=str(path))
    return cfg
