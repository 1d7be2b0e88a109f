"""Runs from any trainer: a CSV or parquet table of runs (a W&B export, a spreadsheet),
mapped to the runs-table shape ``scalelab collect`` writes, so ``fit``, ``report``,
``compare`` and ``transfer`` check and analyse it exactly as a sweep's ``runs.parquet``.

Columns of the table (names exact; README.md, "Bring your own runs"):

    N        parameters                          required; a number > 0
    D        training tokens                     required; a number > 0 (also read as D_total)
    U        unique tokens                       optional (also D_unique); default D: each
                                                 run saw its data once (epochs = D / U)
    loss     the final held-out loss             required; also read as final_loss,
                                                 val_loss or val/loss when exactly one of
                                                 the four is present (``loss_column`` names
                                                 another, e.g. best_loss)
    C        training FLOPs                      optional (also flops); default 6 N D
    recipe   the recipe of each run              optional; text
    seed     the replicate seed                  optional; runs equal but for the seed are
                                                 one cell's replicates (sigma for verdicts)
    state    the run's state                     optional; finished/completed rows count,
                                                 others (running, crashed, ...) are left out
                                                 like a sweep's incomplete runs
    run_id, id, name                             optional labels (any case)
    any other column                             a config column: a hyperparameter (lr,
                                                 optim.lr, weight_decay, batch_size) or a
                                                 setting; --where, --group-by and
                                                 transfer --hp name it as it is spelled

Metrics are not config: columns whose names start with ``_`` or contain ``/`` or ``loss``
(W&B's ``_step``, ``_runtime``, ``train/loss``, ``train_loss``) are kept but not used to
tell cells apart. A config column without a dot (``lr``) also gets a dotted copy
(``config.lr``): the recipes' cell rule (``analysis.tables.cells.cell_columns``) reads dotted
config columns, so runs of one size that differ in ``lr`` are two cells there too.

Bad input is one ``ExternalTableError`` line naming the file and the column: a missing
required column (with a did-you-mean over the present ones), a column of text where
numbers belong, an N, D, U or C that is missing, zero or negative in any row (refused: a
row of a size-less run is a broken export, not a run to skip), an empty table, a file that
is not CSV or parquet, a directory or a FIFO. Rows with a missing or non-finite loss (runs
that never evaluated) are dropped and counted in a note; a table with no finite loss left is
refused. Polars reads the CSV (never Python lists); parquet goes through
``safe_parquet.read_parquet_checked`` (pyarrow first: a damaged file is one line).

Pure: a path in, a polars frame and notes out; no scalelab import.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.atomic import file_kind
from analysis.errors import AnalysisInputError, did_you_mean
from analysis.tables.safe_parquet import CorruptParquetError, one_line, read_parquet_checked

__all__ = [
    "CSV_SUFFIXES",
    "LOSS_ALIASES",
    "PARQUET_SUFFIXES",
    "ExternalRuns",
    "ExternalTableError",
    "is_table_path",
    "output_folder",
    "read_external",
    "to_runs_table",
]

CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet", ".pq")
LOSS_ALIASES = ("loss", "final_loss", "val_loss", "val/loss")
"""Columns read as the loss when exactly one of them is present (``val/loss``: what
``scalelab train`` logs to W&B)."""
_SOURCES = {"N": ("N",), "D": ("D", "D_total"), "U": ("U", "D_unique"), "C": ("C", "flops")}
"""Documented column -> the names it is read from, the first present."""
_LABELS = ("run_id", "id", "name")
_STATE_DONE = ("finished", "completed")
_NOT_CONFIG = {"n", "d", "u", "c", "loss", "recipe", "seed", "state", "block", "member",
               "run_id", "id", "name", "d_total", "d_unique", "flops", "epochs", "created",
               "runtime", "tags", "notes", "user", "sweep", "group", "job_type", "hostname",
               "commit", "github"}
"""Lower-cased names that are never config columns (labels, W&B's run metadata)."""
CONFIG_PREFIX = "config."
_EXAMPLES = 3


class ExternalTableError(CorruptParquetError):
    """A table of runs that cannot be used: ``<file>: <what> (<reason>)``, one line."""

    what = "unusable table of runs"


@dataclass(frozen=True)
class ExternalRuns:
    """The runs of a table in the runs-table shape, and notes on what was changed."""

    runs: pl.DataFrame
    notes: tuple[str, ...]


def is_table_path(path: str | Path) -> bool:
    """Whether ``path`` names a table of runs (by its suffix, any case), not a sweep."""
    return Path(path).suffix.lower() in (*CSV_SUFFIXES, *PARQUET_SUFFIXES)


def output_folder(path: str | Path, folder: str) -> Path:
    """Where a command writes what it would write under ``<sweep>/<folder>`` for a table:
    beside the table, ``<table stem>_<folder>`` (``runs.csv`` -> ``runs_report/``)."""
    path = Path(path)
    return path.with_name(f"{path.stem}_{folder}")


def _regular_file(path: Path) -> None:
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise ExternalTableError(path, err.strerror or "cannot be read") from None
    if stat.S_ISDIR(mode):
        raise ExternalTableError(path, "a directory, not a file")
    if not stat.S_ISREG(mode):
        raise ExternalTableError(path, f"{file_kind(mode)}, not a regular file")


def _read(path: Path) -> pl.DataFrame:
    """Every column of the CSV or parquet file, or one line naming the file."""
    _regular_file(path)
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return read_parquet_checked(path, error=ExternalTableError)
    if os.path.getsize(path) == 0:
        raise ExternalTableError(path, "an empty file")
    try:  # the whole file for the types: a column of numbers with text far down is text
        return pl.read_csv(path, infer_schema_length=None, encoding="utf8-lossy",
                           null_values=["", "NA", "null", "None"], truncate_ragged_lines=False)
    except (OSError, ValueError, pl.exceptions.PolarsError) as err:
        raise ExternalTableError(path, f"not a CSV table: {one_line(err)}") from None
    except BaseException as err:  # polars' Rust panics are BaseException (pyo3)
        if isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError)):
            raise
        raise ExternalTableError(path, f"not a CSV table: {one_line(err)}") from None


_SYNONYMS = {
    "N": ("params", "n_params", "num_params", "nparams", "parameters", "model_params", "model_size",
          "non_embedding_params", "n_parameters", "num_parameters"),
    "D": ("tokens", "n_tokens", "num_tokens", "train_tokens", "training_tokens", "total_tokens",
          "tokens_seen", "seen_tokens"),
    "U": ("unique_tokens", "n_unique_tokens", "num_unique_tokens", "dataset_tokens", "data_tokens"),
    "loss": ("eval_loss", "valid_loss", "validation_loss", "test_loss", "eval/loss", "val_loss_final"),
}
"""Names other trainers and exports give the documented columns: a did-you-mean, never read
as them (whether ``params`` counts the embeddings is the table's to say)."""


def _suggest(name: str, columns: list[str]) -> str:
    """A did-you-mean over ``columns``: a case-insensitive match first, then a name other
    trainers give the column (``_SYNONYMS``; rename it), then the closest spelling."""
    for c in columns:
        if c.lower() == name.lower():
            return f" (did you mean '{c}'?)"
    for c in columns:
        if c.lower() in _SYNONYMS.get(name, ()):
            return f" (is '{c}' it? rename it to '{name}')"
    return did_you_mean(name, columns)


def _find(columns: list[str], names: tuple[str, ...]) -> str | None:
    return next((c for c in names if c in columns), None)


def _missing(path: Path, frame: pl.DataFrame, name: str, also: tuple[str, ...] = ()) -> ExternalTableError:
    shown = ", ".join(frame.columns[:12]) + (", ..." if frame.width > 12 else "")
    alias = f" (or {', '.join(also)})" if also else ""
    return ExternalTableError(path, f"no column '{name}'{alias}{_suggest(name, frame.columns)}; "
                              f"its columns: {shown}")


def _numbers(path: Path, frame: pl.DataFrame, col: str, what: str) -> pl.Series:
    """Column ``col`` as Float64, or one line: text where numbers belong."""
    series = frame[col]
    if series.dtype == pl.Boolean or not (series.dtype.is_numeric() or series.dtype == pl.Null):
        bad = series.drop_nulls().cast(pl.String, strict=False).head(1).to_list()
        example = f" (e.g. '{bad[0][:40]}')" if bad else ""
        raise ExternalTableError(path, f"column '{col}' ({what}) holds {series.dtype} values"
                                 f"{example}, not numbers")
    return series.cast(pl.Float64)


def _positive(path: Path, values: pl.Series, col: str, what: str) -> None:
    """Refuse a column with a missing, non-finite, zero or negative value in any row."""
    ok = (values.is_not_null() & values.is_finite() & (values > 0)).fill_null(False)
    if bad := int((~ok).sum()):
        rows = [i + 1 for i in (~ok).arg_true().head(_EXAMPLES).to_list()]
        first = values.gather([r - 1 for r in rows]).to_list()
        shown = ", ".join(f"row {r}: {'missing' if v is None else f'{v:g}'}"
                          for r, v in zip(rows, first))
        raise ExternalTableError(path, f"column '{col}' ({what}) must be a finite number > 0 in "
                                 f"every row; {bad} row(s) are not ({shown}; rows count from 1 "
                                 "after the header)")


def _loss_column(path: Path, frame: pl.DataFrame, loss_column: str | None) -> str:
    if loss_column is not None:
        if loss_column not in frame.columns:
            raise _missing(path, frame, loss_column)
        return loss_column
    present = [c for c in LOSS_ALIASES if c in frame.columns]
    if len(present) > 1:
        raise ExternalTableError(path, f"columns {', '.join(present)} could each be the loss; "
                                 "name one with --loss-column")
    if not present:
        raise _missing(path, frame, "loss", LOSS_ALIASES[1:])
    return present[0]


def _is_config(name: str) -> bool:
    low = name.lower()
    return not (low in _NOT_CONFIG or low.startswith("_") or "/" in low or "loss" in low)


def _state(frame: pl.DataFrame) -> pl.Expr:
    """COMPLETED for a finished/completed run (or every run without a state column); the
    other states upper-cased (RUNNING, CRASHED, ...), which the fits leave out."""
    col = next((c for c in frame.columns if c.lower() == "state"), None)
    if col is None:
        return pl.lit("COMPLETED")
    text = pl.col(col).cast(pl.String).str.strip_chars().str.to_lowercase()
    return (pl.when(text.is_in(list(_STATE_DONE))).then(pl.lit("COMPLETED"))
            .otherwise(text.str.to_uppercase().fill_null("UNKNOWN")))


def to_runs_table(frame: pl.DataFrame, path: str | Path = "table", *,
                  loss_column: str | None = None) -> ExternalRuns:
    """``frame`` (a table of runs, module docstring) in the runs-table shape: run_id, name,
    state, N, D_total, D_unique, epochs, flops, final_loss, best_loss, recipe and seed when
    given, the config columns (and their ``config.`` copies) and every other column as it
    is. ``loss_column``: the column read as the loss (None: the one of ``LOSS_ALIASES``).
    Raises ``ExternalTableError`` naming ``path`` and the column."""
    path = Path(path)
    if frame.height == 0:
        raise ExternalTableError(path, f"no rows (columns: {', '.join(frame.columns[:12]) or 'none'})")
    notes: list[str] = []
    values: dict[str, pl.Series] = {}
    for key, what in (("N", "parameters"), ("D", "training tokens")):
        col = _find(frame.columns, _SOURCES[key])
        if col is None:
            raise _missing(path, frame, key, _SOURCES[key][1:])
        values[key] = _numbers(path, frame, col, what)
        _positive(path, values[key], col, what)
    for key, what in (("U", "unique tokens"), ("C", "training FLOPs")):
        if (col := _find(frame.columns, _SOURCES[key])) is not None:
            values[key] = _numbers(path, frame, col, what)
            _positive(path, values[key], col, what)
    loss_col = _loss_column(path, frame, loss_column)
    loss = _numbers(path, frame, loss_col, "the loss")
    if "U" in values and bool((values["U"] > values["D"] * (1 + 1e-9)).any()):
        notes.append(f"{path}: some rows have U > D (more unique tokens than tokens trained on)")
    U = values.get("U", values["D"])
    C = values.get("C", 6.0 * values["N"] * values["D"])
    label = next((c for name in _LABELS for c in frame.columns if c.lower() == name), None)
    run_id = (frame[label].cast(pl.String) if label is not None
              and frame[label].null_count() == 0 and frame[label].n_unique() == frame.height
              else pl.Series([f"row{i + 1}" for i in range(frame.height)], dtype=pl.String))
    name_col = next((c for c in frame.columns if c.lower() == "name"), None)
    name = frame[name_col].cast(pl.String).fill_null(run_id) if name_col else run_id
    known = {c for key in _SOURCES for c in _SOURCES[key][:1]} | {loss_col}
    config = [c for c in frame.columns if _is_config(c) and c not in known]
    copies = {f"{CONFIG_PREFIX}{c}": pl.col(c) for c in config
              if "." not in c and f"{CONFIG_PREFIX}{c}" not in frame.columns}
    internal = {"run_id": run_id, "name": name, "N": values["N"], "D_total": values["D"],
                "D_unique": U, "epochs": values["D"] / U, "flops": C, "final_loss": loss}
    out = frame.drop([c for c in (*internal, "D", "U", "C", loss_col) if c in frame.columns])
    out = out.with_columns(state=_state(frame), **internal, **copies)
    if "best_loss" not in out.columns:
        out = out.with_columns(pl.col("final_loss").alias("best_loss"))
    if "recipe" in out.columns:
        out = out.with_columns(pl.col("recipe").cast(pl.String))
    finite = pl.col("final_loss").is_not_null() & pl.col("final_loss").is_finite()
    if dropped := out.height - out.filter(finite).height:
        notes.append(f"{path}: dropped {dropped} row(s) with a missing or non-finite "
                     f"'{loss_col}' (runs without a final loss)")
        out = out.filter(finite)
    if out.height == 0:
        raise ExternalTableError(path, f"no row has a finite '{loss_col}'")
    lead = ["run_id", "name", "state", "N", "D_total", "D_unique", "epochs", "flops",
            "final_loss", "best_loss"]
    return ExternalRuns(out.select(*lead, pl.exclude(lead)), tuple(notes))


def read_external(path: str | Path, *, loss_column: str | None = None) -> ExternalRuns:
    """The table of runs at ``path`` (a .csv, .parquet or .pq file) in the runs-table shape
    (``to_runs_table``); ``ExternalTableError`` (one line naming the file) on bad input."""
    path = Path(path)
    if not is_table_path(path):
        raise ExternalTableError(path, "not a table of runs: expected a .csv, .parquet or .pq file")
    try:
        return to_runs_table(_read(path), path, loss_column=loss_column)
    except ExternalTableError:
        raise
    except AnalysisInputError as err:
        raise ExternalTableError(path, str(err)) from None
