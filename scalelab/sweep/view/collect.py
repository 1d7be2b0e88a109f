"""``scalelab collect SWEEP``: one tidy row per run -> ``<sweep>/runs.parquet``.

Columns: every axis of plan.parquet, run_id, name, state, N, N_non_embedding, D_unique,
D_total, epochs, flops, member, final_loss (the last validation eval), best_loss (the
minimum validation eval), steps_done, wall_time_s, records_note, ``in_spec`` (the sweep's
spec.yaml still plans the run: ``scalelab.sweep.view.current``), and ``recipe`` when the
spec sets ``extra.recipe`` (as an axis, or in ``base``). All eval files are read by ONE
multi-threaded polars scan over the sweep; states come from ``status.sweep_states``.

Corrupt record files (issue 9) never stop a collect. Every record file first gets the
quick check (``train.records_check``: its two ends, about 5 us a file), which keeps junk
and truncated files out of the scan; ``records_note`` names them. A file that passes it
yet does not decode (or lacks a column) makes the scan fail: then halves of the file list
are scanned until the bad files are found (about twice the reads of one scan), they are
named in ``records_note`` too, and the losses come from the rest. A run whose compacted evals.parquet is unusable gets its
losses from its part files, when it has any.

``progress``: a callable that gets a ``CollectProgress`` as each run directory's record
files are read (``done`` of ``total`` runs), one as the eval scan starts, and a ``final``
one once runs.parquet is written (rendered by ``scalelab.cli.progress``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import polars as pl

from scalelab import strict
from scalelab.store.atomic import write_parquet_atomic
from scalelab.sweep.view.current import IN_SPEC, current_run_ids
from scalelab.sweep.view.status import sweep_states
from scalelab.train.record_files import CorruptRecordError, read_record_file
from scalelab.train.records_check import RecordsCheck, check_records

__all__ = ["RUNS_FILE", "CollectProgress", "collect"]

RUNS_FILE = "runs.parquet"
EVAL_SPLIT = "val"
EVAL_COLUMNS = {"step": pl.Int64, "split": pl.String, "loss": pl.Float64}
_COMPACTED = "evals.parquet"


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


def _aggregate(evals: pl.LazyFrame, sweep_dir: Path) -> pl.DataFrame:
    """run_dir -> final_loss (the val eval at the last step), best_loss (the minimum)."""
    return (
        evals.filter(pl.col("split") == EVAL_SPLIT)
        .with_columns(pl.col("_path").str.slice(len(str(sweep_dir)) + 1)
                      .str.replace(r"/evals(\.parquet|/part-\d+\.parquet)$", "").alias("run_dir"))
        .unique(["run_dir", "step"], keep="last")
        .group_by("run_dir")
        .agg(pl.col("loss").sort_by("step").last().alias("final_loss"), pl.col("loss").min().alias("best_loss"))
        .collect()
    )


def _scan(files: list[str]) -> pl.LazyFrame:
    return pl.scan_parquet(files, include_file_paths="_path", missing_columns="raise",
                           extra_columns="ignore", schema=EVAL_COLUMNS)


# What a scan raises on a file that does not decode (a Rust panic arrives as PanicException).
_SCAN_ERRORS = (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError)


def _undecodable(files: list[str], *, failed: bool = False) -> dict[str, str]:
    """{file: why} for the ``files`` a scan cannot read: a failing scan is split in halves,
    and each half that fails again, down to single files (for one bad file among n, about
    2n file reads). ``failed``: a scan of ``files`` has just failed, do not repeat it."""
    if not failed:
        try:
            _scan(files).collect()
            return {}
        except _SCAN_ERRORS:
            pass
    if len(files) == 1:
        return {files[0]: _why(files[0])}
    mid = len(files) // 2
    return {**_undecodable(files[:mid]), **_undecodable(files[mid:])}


def _why(path: str) -> str:
    try:
        read_record_file(path, EVAL_COLUMNS)
    except CorruptRecordError as err:
        return err.reason
    return "polars cannot decode it (pyarrow can)"


def _losses(sweep_dir: Path, files: list[str]) -> tuple[pl.DataFrame, dict[str, str]]:
    """The losses per run_dir from the eval ``files``, and {file: why} for those that do
    not decode (looked for only when the one scan fails)."""
    bad: dict[str, str] = {}
    if files:
        try:
            return _aggregate(_scan(files), sweep_dir), bad
        except _SCAN_ERRORS:  # a file with intact ends that does not decode, or lacks a column
            bad = _undecodable(files, failed=True)
            files = [f for f in files if f not in bad]
    if not files:
        empty = pl.DataFrame(schema={"run_dir": pl.String, "final_loss": pl.Float64, "best_loss": pl.Float64})
        return empty, bad
    return _aggregate(_scan(files), sweep_dir), bad


def _checks(base: str, run_dirs: list[str], progress: CollectReporter | None) -> list[RecordsCheck]:
    """Each run directory's quick records check, reporting each one done."""
    checks = []
    for d in run_dirs:
        checks.append(check_records(os.path.join(base, d)))
        if progress is not None:
            progress(CollectProgress(len(checks), len(run_dirs), "reading run directories"))
    return checks


def _runs_losses(sweep_dir: Path, run_dirs: list[str], states: list[str | None],
                 progress: CollectReporter | None = None) -> tuple[pl.DataFrame, list[str | None]]:
    """The losses per run_dir, and each run's ``records_note``."""
    base = str(sweep_dir)
    checks = _checks(base, run_dirs, progress)
    owner = {os.path.join(base, d, name): i
             for i, (d, check, state) in enumerate(zip(run_dirs, checks, states))
             for name in _eval_files(check, state)}
    if progress is not None:
        progress(CollectProgress(len(run_dirs), len(run_dirs), f"scanning {len(owner)} eval files"))
    losses, bad = _losses(sweep_dir, list(owner))
    for path, why in bad.items():
        i = owner[path]
        name = os.path.relpath(path, os.path.join(base, run_dirs[i]))
        checks[i] = RecordsCheck(tuple(n for n in checks[i].readable if n != name),
                                 (*checks[i].corrupt, (name, why)), checks[i].set_aside)
    return losses, [c.note for c in checks]


def _base_recipe(sweep_dir: Path) -> str | None:
    """``base.extra.recipe`` of the sweep's spec.yaml copy (read through scalelab.yamlsafe:
    a damaged or hostile copy is a one-line UserError, never an alias expansion)."""
    spec = sweep_dir / "spec.yaml"
    if not spec.exists():
        return None
    tree = strict.load_yaml(spec)
    base = tree.get("base") if isinstance(tree, dict) else None
    extra = base.get("extra") if isinstance(base, dict) else None
    recipe = extra.get("recipe") if isinstance(extra, dict) else None
    return None if recipe is None else str(recipe)


def collect(sweep_dir: str | Path, *, progress: CollectReporter | None = None) -> pl.DataFrame:
    """The runs table of a sweep; also written atomically to ``<sweep>/runs.parquet``.
    ``progress``: see the module docstring."""
    sweep_dir = Path(sweep_dir).resolve()
    frame = sweep_states(sweep_dir, records=False)
    if progress is not None:
        progress(CollectProgress(0, frame.height, "reading run directories"))
    losses, notes = _runs_losses(sweep_dir, frame["run_dir"].to_list(), frame["state"].to_list(),
                                 progress)
    frame = frame.with_columns(pl.Series("records_note", notes, dtype=pl.String))
    frame = frame.join(losses, on="run_dir", how="left")
    if "extra.recipe" in frame.columns:
        frame = frame.with_columns(pl.col("extra.recipe").cast(pl.String).alias("recipe"))
    elif (recipe := _base_recipe(sweep_dir)) is not None:
        frame = frame.with_columns(pl.lit(recipe).alias("recipe"))
    if (ids := current_run_ids(sweep_dir)) is not None:
        frame = frame.with_columns(pl.col("run_id").is_in(sorted(ids)).alias(IN_SPEC))
    drop = [c for c in ("note", "job_id") if c in frame.columns]
    frame = frame.drop(drop)
    write_parquet_atomic(sweep_dir / RUNS_FILE, frame)
    if progress is not None:
        progress(CollectProgress(frame.height, frame.height, f"wrote {RUNS_FILE}", final=True))
    return frame

