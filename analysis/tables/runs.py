"""From a sweep's tidy runs table to the (N, D, U, loss) table the fitter reads.

Input: the table ``scalelab collect`` writes (``scalelab.sweep.view.collect``: axis columns,
run_id, name, state, N, N_non_embedding, D_unique, D_total, epochs, flops, final_loss,
best_loss, wall_time_s, ...) or any polars DataFrame that already has N, D, U and loss.

Runs that cannot enter a fit are dropped, each reason counted in a note: records that
failed ``collect``'s verification (``records_verified`` False: a record file changed since
its manifest, or another run's directory; their losses are null), state other than COMPLETED (DIVERGED runs are terminal
and excluded from fits; FAILED, PREEMPTED, RUNNING, ... are incomplete), and missing or non-finite N, D, U or loss.
Every run whose ``records_note`` is set (a corrupt record file, a failed verification) is
named in a note of its own, so a report says which file of which run.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.errors import AnalysisInputError

__all__ = ["IN_SPEC", "LOSS_COLUMNS", "RECORDS_NOTE", "VERIFIED", "FitTable", "drop_stale",
           "prepare_runs", "records_notes"]

LOSS_COLUMNS = ("final_loss", "best_loss")
RECORDS_NOTE = "records_note"
"""runs.parquet's column: what ``collect`` found wrong with a run's record files."""
VERIFIED = "records_verified"
"""runs.parquet's column: False when a run's records failed verification."""
_NAMED = 20


@dataclass(frozen=True)
class FitTable:
    """The rows a fit may use (``data``: N, D, U, loss + the input's other columns) and
    one note per exclusion reason."""

    data: pl.DataFrame
    notes: tuple[str, ...]
    n_input: int


def _renamed(runs: pl.DataFrame, loss: str, n_column: str) -> pl.DataFrame:
    cols = set(runs.columns)
    out = runs
    mapping = {}
    if "N" not in cols or n_column != "N":
        if n_column not in cols:
            raise AnalysisInputError(
                f"runs table has no '{n_column}' column; it has {sorted(cols)}"
            )
        mapping["N"] = pl.col(n_column)
    if "D" not in cols:
        if "D_total" not in cols:
            raise AnalysisInputError(f"runs table needs 'D' or 'D_total'; it has {sorted(cols)}")
        mapping["D"] = pl.col("D_total")
    if "U" not in cols:
        if "D_unique" in cols:
            mapping["U"] = pl.col("D_unique")
        else:  # no repetition information: every run saw its data once
            mapping["U"] = pl.col("D") if "D" in cols else pl.col("D_total")
    if loss != "loss" or "loss" not in cols:
        if loss not in cols:
            raise AnalysisInputError(
                f"runs table has no loss column '{loss}'; it has {sorted(cols)} "
                f"(use one of {LOSS_COLUMNS} or 'loss')"
            )
        mapping["loss"] = pl.col(loss)
    if mapping:
        out = out.with_columns(**{k: v.cast(pl.Float64) for k, v in mapping.items()})
    return out.with_columns(pl.col(c).cast(pl.Float64) for c in ("N", "D", "U", "loss"))


IN_SPEC = "in_spec"
"""runs.parquet's column (``scalelab collect``): True when the sweep's latest spec still plans
the run; False for runs left in the directory by an earlier spec."""


def drop_stale(runs: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """``runs`` without the runs of earlier specs (``IN_SPEC`` False), and a note saying how
    many were left out (None when none were or the column is absent)."""
    if IN_SPEC not in runs.columns:
        return runs, None
    keep = runs.filter(pl.col(IN_SPEC).fill_null(True))
    if stale := runs.height - keep.height:
        return keep, (f"left out {stale} run(s) of earlier specs of this sweep (no longer "
                      "planned by its spec.yaml)")
    return keep, None


def records_notes(runs: pl.DataFrame) -> list[str]:
    """One note per run whose ``records_note`` is set (the first ``_NAMED``, then a count):
    its run directory (or id) and the note."""
    if RECORDS_NOTE not in runs.columns:
        return []
    label = next((c for c in ("run_dir", "run_id", "name") if c in runs.columns), None)
    flagged = runs.filter(pl.col(RECORDS_NOTE).is_not_null())
    names = flagged[label].cast(pl.String).to_list() if label else ["run"] * flagged.height
    notes = [f"records of {name}: {note}" for name, note in
             zip(names[:_NAMED], flagged[RECORDS_NOTE].to_list()[:_NAMED])]
    if flagged.height > _NAMED:
        notes.append(f"... and {flagged.height - _NAMED} more run(s) with a records_note")
    return notes


def _drop_unverified(runs: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """``runs`` without those whose records failed verification, and a note counting them."""
    if VERIFIED not in runs.columns:
        return runs, None
    keep = runs.filter(pl.col(VERIFIED).fill_null(True))
    if bad := runs.height - keep.height:
        return keep, f"excluded {bad} run(s) whose records failed verification (named above)"
    return keep, None


def prepare_runs(runs: pl.DataFrame, *, loss: str = "final_loss", n_column: str = "N") -> FitTable:
    """Select fit-ready rows: runs the sweep's latest spec plans (``drop_stale``), COMPLETED state (when a ``state``
    column exists) and finite, positive N, D, U, loss. ``loss`` picks the runs-table column used as the loss."""
    if not isinstance(runs, pl.DataFrame):
        raise AnalysisInputError(f"expected a polars DataFrame, got {type(runs).__name__}")
    if "loss" in runs.columns and loss in LOSS_COLUMNS and loss not in runs.columns:
        loss = "loss"  # a plain (N, D, U, loss) table
    runs, stale = drop_stale(runs)
    notes: list[str] = [stale] if stale else []
    notes += records_notes(runs)
    n_input = runs.height
    runs, unverified = _drop_unverified(runs)
    notes += [unverified] if unverified else []
    table = _renamed(runs, loss, n_column)
    if "state" in table.columns:
        state = pl.col("state").cast(pl.Utf8).fill_null("NOT_STARTED")
        others = table.filter(state != "COMPLETED").select(state.alias("s"))["s"]
        for name, count in sorted(others.value_counts().rows()):
            why = "diverged (terminal; excluded from fits)" if name == "DIVERGED" else "incomplete"
            notes.append(f"excluded {count} run(s) in state {name}: {why}")
        table = table.filter(state == "COMPLETED")
    good = pl.all_horizontal(
        [
            pl.col(c).is_not_null() & pl.col(c).is_finite() & (pl.col(c) > 0)
            for c in ("N", "D", "U", "loss")
        ]
    )
    bad = table.filter(~good).height
    if bad:
        notes.append(
            f"excluded {bad} run(s) with a missing, non-finite or non-positive N, D, U or loss"
        )
    table = table.filter(good)
    return FitTable(data=table, notes=tuple(notes), n_input=n_input)
