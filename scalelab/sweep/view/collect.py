"""``scalelab collect SWEEP``: one tidy row per run -> ``<sweep>/runs.parquet``.

Columns: every axis of plan.parquet, run_id, name, state, N, N_non_embedding, D_unique,
D_total, epochs, flops, member, final_loss (the last validation eval), best_loss (the
minimum validation eval), final_loss_se (the Monte Carlo SE of final_loss: null when the
loss is exact, as AR's NLL), loss_is_bound (True for runs whose evals are ELBO estimates,
the masked-diffusion objective's upper bound on the NLL, which carries an SE),
steps_done, wall_time_s, records_note, records_verified, ``in_spec`` (the sweep's
spec.yaml still plans the run: ``scalelab.sweep.view.current``), and ``recipe`` when the
spec sets ``extra.recipe`` (as an axis, or in ``base``). States come from
``status.sweep_states``.

Records are verified before they are read (``train.records.records_manifest.verify_run``): a
finished run's files against its manifest.json (size and sha256: one flipped bit), and
the run id in its config.yaml, manifest and evals against the plan row (a directory
copied or symlinked over another run's). A run that fails is kept with its state, its
losses null (so it leaves the fits), ``records_verified`` False and a ``records_note``
saying which file and what (``INVALID ...``); ``summary`` names it in collect's one line.
``records_verified`` is True for a verified run and null for one with nothing to verify
against: not finished, or finished before record manifests existed (kept and fitted as
before, counted as unverified in the summary).

Corrupt record files never stop a collect. Every record file first gets the quick check
(``train.records.records_check``: its two ends, about 5 us a file), which keeps junk and truncated
files out, and FIFOs, devices and files over their size limit with them (it opens
through ``analysis.tables.bounded_read``: never blocking); ``records_note`` names them
(``CORRUPT ...``). A file a manifest verified is read once more (bounded) and decoded by
polars from those bytes, when their sha256 is the manifest's; every other eval file
(unfinished runs, runs from before manifests, a file replaced since it was verified) is
decoded by pyarrow first (``read_record_file``, about 1 ms a file), from the descriptor
it checked: polars never decodes bytes nobody vouched for, as a damaged file can abort it. A file
that does not decode is named in ``records_note`` too, and the losses come from the
rest. A run whose compacted evals.parquet is unusable gets its losses from its part
files, when it has any.

runs.parquet is written with its manifest (``store.sweep_files.write_sweep_table``: the
bytes checked to decode back to the table before they reach the disk, the manifest
last). A full disk leaves the old runs.parquet, or a new one without its manifest: either
way ``runs_table_stale`` says so and the next command collects again; nothing half
written is ever read as a runs table.

``progress``: a callable that gets a ``CollectProgress`` as each run directory's record
files are read (``done`` of ``total`` runs), one as the eval scan starts, and a ``final``
one once runs.parquet is written (rendered by ``scalelab.cli.progress``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import polars as pl

from analysis.tables.bounded_read import Unreadable, read_bounded
from analysis.tables.sweep_manifest import SweepManifestError, read_verified
from scalelab import yamlsafe
from scalelab.errors import UserError
from scalelab.store.layout import (
    CONFIG_FILE,
    EVALS_FILE,
    MANIFEST_FILE,
    PLAN_FILE,
    RUNS_FILE,
    RUNS_FOLDER,
    SPEC_FILE,
    STATUS_FILE,
)
from scalelab.store.status import read_status
from scalelab.store.sweep_files import read_sweep_text, write_sweep_table
from scalelab.sweep.view.current import IN_SPEC, current_run_ids
from scalelab.sweep.view.status import sweep_states
from scalelab.train.records.record_files import CorruptRecordError, read_record_file
from scalelab.train.records.records import ADDED_COLUMNS
from scalelab.train.records.records_check import RecordsCheck, check_records
from scalelab.train.records.records_manifest import Verdict, id_problem, verify_run

__all__ = ["INVALID", "RUNS_FILE", "VERIFIED", "CollectProgress", "collect", "runs_table_stale",
           "stale_reason", "summary"]

VERIFIED = "records_verified"
"""runs.parquet's column: True verified, False failed (losses null), null nothing to verify."""
INVALID = "INVALID"
"""How ``records_note`` starts the reason a run's records failed verification."""
EVAL_SPLIT = "val"
EVAL_COLUMNS = {"run_id": pl.String, "step": pl.Int64, "split": pl.String, "loss": pl.Float64,
                "loss_se": pl.Float64}
"""The eval columns collect reads; ``loss_se`` (``records.ADDED_COLUMNS``) reads as null
from files written before it existed."""
_COMPACTED = EVALS_FILE


@dataclass(frozen=True)
class CollectProgress:
    """``done`` of ``total`` run directories read; ``step`` says what collect is doing;
    ``final``: runs.parquet is written (the ``analysis.progress.Progress`` protocol)."""

    done: int
    total: int
    step: str
    final: bool = False
    task: ClassVar[str] = "collect"
    label: ClassVar[str] = "collect"

    @property
    def detail(self) -> str:
        return self.step

    def line(self) -> str:
        return f"collect: {self.done}/{self.total} runs, {self.step}"


CollectReporter = Callable[[CollectProgress], None]


def _eval_files(check: RecordsCheck, state: str | None) -> list[str]:
    """A run's eval files that passed the quick check (names in its directory): the
    compacted evals.parquet, plus the part files (the train loop writes
    ``evals/part-*.parquet`` at checkpoints, compacts at the end) of an unfinished run, or
    of one whose compacted file is missing or corrupt."""
    finished = state in (None, "COMPLETED", "DIVERGED") and _COMPACTED in check.readable
    return [n for n in check.readable if n == _COMPACTED or (not finished and n.startswith("evals/"))]


_LOSSES = {"run_dir": pl.String, "final_loss": pl.Float64, "best_loss": pl.Float64,
           "final_loss_se": pl.Float64, "loss_is_bound": pl.Boolean,
           "run_ids": pl.List(pl.String)}


def _aggregate(evals: pl.DataFrame, sweep_dir: Path) -> pl.DataFrame:
    """run_dir -> final_loss (the val eval at the last step), best_loss (the minimum),
    run_ids (the ids its val rows carry)."""
    if evals.height == 0:
        return pl.DataFrame(schema=_LOSSES)
    return (
        evals.lazy().filter(pl.col("split") == EVAL_SPLIT)
        .with_columns(pl.col("_path").str.slice(len(str(sweep_dir)) + 1)
                      .str.replace(r"/evals(\.parquet|/part-\d+\.parquet)$", "").alias("run_dir"))
        .unique(["run_dir", "step"], keep="last")
        .group_by("run_dir")
        .agg(pl.col("loss").sort_by("step").last().alias("final_loss"), pl.col("loss").min().alias("best_loss"),
             pl.col("loss_se").sort_by("step").last().alias("final_loss_se"),
             pl.col("loss_se").is_not_null().any().alias("loss_is_bound"),
             pl.col("run_id").unique().sort().alias("run_ids"))
        .collect()
    )


# What a scan raises on a file that does not decode (a Rust panic arrives as PanicException).
_SCAN_ERRORS = (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError)


def _scan(files: dict[str, str]) -> tuple[pl.DataFrame, list[str]]:
    """The eval rows of ``files`` ({path: the sha256 its manifest vouched for}), each read
    once through ``bounded_read`` and decoded by polars from those bytes when they are the
    bytes verified; the paths whose bytes are not (replaced since) are returned for pyarrow."""
    frames, changed = [], []
    for path, want in files.items():
        try:
            found = read_bounded(path)
        except (OSError, Unreadable):
            changed.append(path)
            continue
        if found.sha256 != want:
            changed.append(path)
            continue
        names = pl.read_parquet_schema(io.BytesIO(found.data))
        frame = pl.read_parquet(io.BytesIO(found.data), columns=[c for c in EVAL_COLUMNS if c in names])
        frame = frame.with_columns(pl.lit(None).alias(c) for c in ADDED_COLUMNS if c not in names)
        frame = frame.select(list(EVAL_COLUMNS)).cast(EVAL_COLUMNS)
        frames.append(frame.with_columns(pl.lit(path).alias("_path")))
    return (pl.concat(frames, how="vertical") if frames else pl.DataFrame()), changed


def _decoded(files: list[str]) -> tuple[list[pl.DataFrame], dict[str, str]]:
    """The eval rows of each of ``files``, decoded by pyarrow one by one, and {file: why}
    for those that are corrupt."""
    frames, bad = [], {}
    for path in files:
        try:
            frame = read_record_file(path, EVAL_COLUMNS, ADDED_COLUMNS)
        except CorruptRecordError as err:
            bad[path] = err.reason
            continue
        frames.append(frame.with_columns(pl.lit(path).alias("_path")))
    return frames, bad


def _losses(sweep_dir: Path, trusted: dict[str, str], others: list[str]) -> tuple[pl.DataFrame, dict[str, str]]:
    """The losses per run_dir from the eval files (``trusted``: verified by a manifest,
    with the sha256 it gives), and {file: why} for those that do not decode."""
    frames: list[pl.DataFrame] = []
    if trusted:
        try:
            scanned, changed = _scan(trusted)
            frames.append(scanned)
            others = changed + others
        except _SCAN_ERRORS:  # cannot happen to files as written; decode them one by one
            others = list(trusted) + others
    decoded, bad = _decoded(others)
    frames = [f for f in frames if f.height]
    rows = pl.concat([*frames, *decoded], how="vertical") if frames or decoded else pl.DataFrame()
    return _aggregate(rows, sweep_dir), bad


def _checks(base: str, run_dirs: list[str], progress: CollectReporter | None) -> list[RecordsCheck]:
    """Each run directory's quick records check, reporting each one done."""
    checks = []
    for d in run_dirs:
        checks.append(check_records(os.path.join(base, d)))
        if progress is not None:
            progress(CollectProgress(len(checks), len(run_dirs), "reading run directories"))
    return checks


def _verdict(run_dir: str, run_id: str) -> Verdict:
    """``verify_run`` of one run directory (a status.json that does not parse: the
    observed state says so already, nothing to verify)."""
    try:
        status = read_status(run_dir)
    except UserError:
        status = None
    return verify_run(run_dir, run_id, status)


def _records_ids(verdicts: list[Verdict], run_dirs: list[str], run_ids: list[str],
                 losses: pl.DataFrame) -> list[Verdict]:
    """``verdicts``, with the runs whose evals carry another run's id turned False (checked
    where a config.yaml says which ids the run has)."""
    found = dict(zip(losses["run_dir"].to_list(), losses["run_ids"].to_list()))
    out = []
    for verdict, d, rid in zip(verdicts, run_dirs, run_ids):
        bad = id_problem(rid, verdict.ids, found.get(d) or [], _COMPACTED) if verdict.ids else None
        out.append(Verdict(False, bad, verdict.ids) if bad and verdict.verified is not False else verdict)
    return out


def _note(check: RecordsCheck, verdict: Verdict) -> str | None:
    """A run's ``records_note``: corrupt files, then why its records failed verification."""
    said = [n for n in (check.note, verdict.problem and f"{INVALID} {verdict.problem}") if n]
    return "; ".join(said) or None


def _runs_losses(sweep_dir: Path, frame: pl.DataFrame, progress: CollectReporter | None = None
                 ) -> tuple[pl.DataFrame, list[str | None], list[bool | None]]:
    """The losses per run_dir, and each run's ``records_note`` and ``records_verified``."""
    base = str(sweep_dir)
    run_dirs, states, run_ids = (frame[c].to_list() for c in ("run_dir", "state", "run_id"))
    checks = _checks(base, run_dirs, progress)
    verdicts = [_verdict(os.path.join(base, d), rid) for d, rid in zip(run_dirs, run_ids)]
    owner = {os.path.join(base, d, name): i
             for i, (d, check, state, verdict) in enumerate(zip(run_dirs, checks, states, verdicts))
             if verdict.verified is not False
             for name in _eval_files(check, state)}
    if progress is not None:
        progress(CollectProgress(len(run_dirs), len(run_dirs), f"reading {len(owner)} eval files"))
    trusted = {f: dict(verdicts[i].sha256).get(os.path.basename(f), "")
               for f, i in owner.items() if verdicts[i].verified}
    losses, bad = _losses(sweep_dir, trusted, [f for f, i in owner.items() if not verdicts[i].verified])
    for path, why in bad.items():
        i = owner[path]
        name = os.path.relpath(path, os.path.join(base, run_dirs[i]))
        checks[i] = RecordsCheck(tuple(n for n in checks[i].readable if n != name),
                                 (*checks[i].corrupt, (name, why)), checks[i].set_aside)
    verdicts = _records_ids(verdicts, run_dirs, run_ids, losses)
    invalid = {d for d, v in zip(run_dirs, verdicts) if v.verified is False}
    losses = losses.filter(~pl.col("run_dir").is_in(sorted(invalid))).drop("run_ids")
    return losses, [_note(c, v) for c, v in zip(checks, verdicts)], [v.verified for v in verdicts]


def _base_recipe(sweep_dir: Path) -> str | None:
    """``base.extra.recipe`` of the sweep's spec.yaml copy (checked against its manifest,
    then parsed by scalelab.yamlsafe: a damaged or hostile copy is a one-line UserError,
    never an alias expansion)."""
    spec = sweep_dir / SPEC_FILE
    text = read_sweep_text(spec)
    if text is None:
        return None
    tree = yamlsafe.load(text, file=str(spec))
    base = tree.get("base") if isinstance(tree, dict) else None
    extra = base.get("extra") if isinstance(base, dict) else None
    recipe = extra.get("recipe") if isinstance(extra, dict) else None
    return None if recipe is None else str(recipe)


_NAMED = 5
"""Runs whose records ``summary`` names one by one; the rest are counted."""


def summary(frame: pl.DataFrame) -> str:
    """collect's one line about a runs table: the runs per state, then each run with a
    ``records_note`` (the first ``_NAMED``: run directory and note), then how many finished
    runs have no manifest to verify against."""
    counts = frame.group_by("state").len().sort("state", nulls_last=True)
    parts = [", ".join(f"{n} {(s or 'not started').lower()}" for s, n in counts.iter_rows())]
    flagged = frame.filter(pl.col("records_note").is_not_null())
    if flagged.height:
        named = [f"{d}: {n}" for d, n in flagged.select("run_dir", "records_note").head(_NAMED).iter_rows()]
        more = f" (+{flagged.height - _NAMED} more: records_note in {RUNS_FILE})" if flagged.height > _NAMED else ""
        parts.append(f"records of {flagged.height} run(s): " + " | ".join(named) + more)
    finished = pl.col("state").is_in(["COMPLETED", "DIVERGED"])
    if unverified := frame.filter(finished & pl.col(VERIFIED).is_null()).height:
        parts.append(f"{unverified} finished run(s) unverified (no manifest.json: finished before "
                     "record manifests)")
    return "; ".join(parts)


_SWEEP_INPUTS = (SPEC_FILE, PLAN_FILE)
"""Files of a sweep directory that change runs.parquet: the spec (``in_spec``), the plan."""
_RUN_INPUTS = (STATUS_FILE, MANIFEST_FILE, CONFIG_FILE, EVALS_FILE, "evals")
"""Files of a run directory that change its row: state, verification, ids, losses (the
compacted evals and the folder of an unfinished run's part files)."""


def _runs_file_problem(path: Path) -> str | None:
    """Why ``runs.parquet`` is not vouched for by its manifest (``store.sweep_files``), or
    None: one without a manifest (collected before manifests, or its manifest lost to a
    full disk), that fails it or cannot be read is collected again."""
    try:
        found = read_verified(path)
    except SweepManifestError as err:
        return f"{RUNS_FILE} does not match its manifest ({err.reason})"
    except (OSError, Unreadable) as err:
        return f"{RUNS_FILE} unreadable ({err})"
    return None if found.checked else f"{RUNS_FILE} has no manifest"


def runs_table_stale(sweep_dir: str | Path) -> bool:
    """The one freshness rule of ``<sweep>/runs.parquet``, for every command that reads it
    (fit, report, compare, next: ``scalelab.cli.runs_table``): ``stale_reason`` is not None."""
    return stale_reason(sweep_dir) is not None


def stale_reason(sweep_dir: str | Path) -> str | None:
    """Why ``<sweep>/runs.parquet`` is stale, and collected again, or None when it is fresh:
    it is missing, fails its manifest (or has none), or is older (mtime) than the sweep's
    spec.yaml or plan.parquet, than its runs/ folder, or than any run directory or that
    run's status.json, manifest.json, config.yaml, evals.parquet or evals/ part folder. A
    run that finishes rewrites its status.json (atomically: a new mtime), so the next
    command sees it. A directory with a runs.parquet and no plan.parquet (a table copied off
    the cluster) has no plan to collect from: its table is read as it is, checked against
    its manifest when it has one (``store.sweep_files``).

    A sweep directory has at most a few thousand runs: the rule costs a few stats per run
    and one read of runs.parquet, far less than a collect."""
    sweep_dir = Path(sweep_dir)
    runs_file = sweep_dir / RUNS_FILE
    if not os.path.lexists(runs_file):
        return f"{RUNS_FILE} missing"
    planned = os.path.lexists(sweep_dir / PLAN_FILE)  # else no plan to collect from
    if planned and (problem := _runs_file_problem(runs_file)):
        return problem
    try:
        written = runs_file.stat().st_mtime
    except OSError as err:  # a dangling symlink, a loop
        return f"{RUNS_FILE} unreadable ({err.strerror})"
    run_root = sweep_dir / RUNS_FOLDER
    paths = [sweep_dir / name for name in _SWEEP_INPUTS] + [run_root]
    if run_root.is_dir():
        for run in run_root.iterdir():
            paths += [run, *(run / name for name in _RUN_INPUTS)]
    for path in paths:
        try:
            if path.stat().st_mtime > written:
                return f"{RUNS_FILE} older than the runs"
        except OSError:  # absent (not every run has every file), or not a directory
            continue
    return None


def collect(sweep_dir: str | Path, *, progress: CollectReporter | None = None) -> pl.DataFrame:
    """The runs table of a sweep; also written atomically to ``<sweep>/runs.parquet``.
    ``progress``: see the module docstring."""
    sweep_dir = Path(sweep_dir).resolve()
    frame = sweep_states(sweep_dir, records=False)
    if progress is not None:
        progress(CollectProgress(0, frame.height, "reading run directories"))
    losses, notes, verified = _runs_losses(sweep_dir, frame, progress)
    frame = frame.with_columns(pl.Series("records_note", notes, dtype=pl.String),
                               pl.Series(VERIFIED, verified, dtype=pl.Boolean))
    frame = frame.join(losses, on="run_dir", how="left")
    if "extra.recipe" in frame.columns:
        frame = frame.with_columns(pl.col("extra.recipe").cast(pl.String).alias("recipe"))
    elif (recipe := _base_recipe(sweep_dir)) is not None:
        frame = frame.with_columns(pl.lit(recipe).alias("recipe"))
    if (ids := current_run_ids(sweep_dir)) is not None:
        frame = frame.with_columns(pl.col("run_id").is_in(sorted(ids)).alias(IN_SPEC))
    drop = [c for c in ("note", "job_id") if c in frame.columns]
    frame = frame.drop(drop)
    write_sweep_table(sweep_dir / RUNS_FILE, frame)  # then its manifest, both atomic
    if progress is not None:
        progress(CollectProgress(frame.height, frame.height, f"wrote {RUNS_FILE}", final=True))
    return frame

