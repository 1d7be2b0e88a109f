"""``scalelab status SWEEP``: the sweep as a grid of state glyphs.

Rows are model size N, columns are unique tokens D (or epochs when D does not vary),
and one panel per combination of the other axes (optimizer, lr, wd, ...). A sweep with
blocks (``scalelab.sweep.spec.blocks``) gets one grid per block, laid out from that block's
runs alone: an axis the block does not vary is never a panel or a column of its grid.
A cell holds one glyph per run (seeds, members): green check = COMPLETED, blue arrow = RUNNING, and so
on (``GLYPHS``). States come from ``observe``: status.json, claims and ONE scheduler
poll for the whole sweep. A run with a corrupt record file (junk or truncated parquet), or
one an earlier attempt set aside, gets a red ``!`` beside its glyph, and a line under the
grid naming the file (``train.records.records_check``). TIMEOUT runs (a Slurm time limit,
requeues spent) get a line with the command that resumes them.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import polars as pl
from rich.console import Group
from rich.table import Table
from rich.text import Text

from scalelab.sweep.run.launch import read_plan
from scalelab.sweep.run.observe import observe
from scalelab.sweep.view.plan_view import BLOCK
from scalelab.train.records.records_check import check_records

__all__ = ["GLYPHS", "RECORDS_MARK", "grid_axes", "render_status", "summary", "sweep_states"]

GLYPHS: dict[str | None, tuple[str, str]] = {
    "COMPLETED": ("✔", "green"),
    "RUNNING": ("▶", "bold blue"),
    "PENDING": ("…", "cyan"),
    "PREEMPTED": ("↻", "yellow"),
    "TIMEOUT": ("⧗", "yellow"),
    "FAILED": ("✗", "bold red"),
    "CANCELLED": ("⊘", "red"),
    "DIVERGED": ("∞", "magenta"),
    None: ("○", "dim"),
}
"""State -> (glyph, rich style). None = not started."""
RECORDS_MARK = ("!", "bold red")
"""Beside a run's glyph: its ``records_note`` says a record file is corrupt or was set aside."""
_NOTES_SHOWN = 20

_NOT_AXES = {"run_id", "name", "run_dir", "member", "N", "N_non_embedding", "D_unique", "D_total",
             "epochs", "steps", "flops", "gpu_hours", "micro_batch", "gpu_gib", "seed", "state",
             "note", "job_id", "attempts", "steps_done", "wall_time_s", "records_note"}


def sweep_states(sweep_dir: str | Path, *, records: bool = True) -> pl.DataFrame:
    """plan.parquet plus, per run, its effective ``state``, ``note``, ``job_id``, ``attempts``,
    ``steps_done``, ``wall_time_s`` and ``records_note`` (corrupt or set-aside record
    files, None when there are none or ``records`` is False: ``collect`` looks itself)."""
    sweep_dir = Path(sweep_dir)
    plan = read_plan(sweep_dir)
    base = str(sweep_dir)
    run_dirs = [os.path.join(base, d) for d in plan["run_dir"]]
    views = observe(run_dirs)
    notes = [check_records(d).note for d in run_dirs] if records else [None] * len(run_dirs)
    return plan.with_columns(
        pl.Series("state", [v.state for v in views], dtype=pl.String),
        pl.Series("note", [v.note for v in views], dtype=pl.String),
        pl.Series("job_id", [v.job_id for v in views], dtype=pl.String),
        pl.Series("attempts", [int((v.status or {}).get("attempts", 0)) for v in views], dtype=pl.Int64),
        pl.Series("steps_done", [(v.status or {}).get("steps_done") for v in views], dtype=pl.Int64),
        pl.Series("wall_time_s", [(v.status or {}).get("wall_time_s") for v in views], dtype=pl.Float64),
        pl.Series("records_note", notes, dtype=pl.String),
    )


def grid_axes(frame: pl.DataFrame) -> tuple[str | None, str | None, list[str]]:
    """(row axis, column axis, facet axes) for a sweep table.

    Rows: N; columns: D_unique, else epochs, else D_total; when N or D does not vary,
    the first remaining axes take their place, so a one-axis sweep is still a grid."""
    def varies(col: str) -> bool:
        return col in frame.columns and frame[col].n_unique() > 1

    row = "N" if varies("N") else None
    col = next((c for c in ("D_unique", "epochs", "D_total") if varies(c)), None)
    taken = {"data.unique_tokens"} if col == "D_unique" else {"data.epochs"} if col == "epochs" else set()
    if row == "N":
        taken |= {c for c in frame.columns if c.startswith("model.")}
    facets = [c for c in frame.columns if c not in _NOT_AXES and c not in taken and varies(c)]
    if row is None and facets:
        row = facets.pop(0)
    if col is None and facets:
        col = facets.pop(0)
    # an axis fixed by the row and column (e.g. an lr derived from the width) is no facet
    grid = [c for c in (row, col) if c]
    if grid:
        cells = frame.select(grid).n_unique()
        facets = [f for f in facets if frame.select([*grid, f]).n_unique() > cells]
    return row, col, facets


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(value) >= scale:
                return f"{value / scale:.3g}{unit}"
    return str(value)


def _cell(runs: list[tuple[str | None, bool]]) -> Text:
    """One glyph per (state, flagged) run, then a ``RECORDS_MARK`` per flagged run."""
    text = Text()
    for state, run in itertools.groupby(s for s, _ in runs):
        glyph, style = GLYPHS.get(state, ("?", "white"))
        text.append(glyph * len(list(run)), style=style)
    flagged = sum(f for _, f in runs)
    if flagged:
        text.append(RECORDS_MARK[0] * flagged, style=RECORDS_MARK[1])
    return text


def _sort_key(values: tuple) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in values)


def render_status(frame: pl.DataFrame, title: str = "") -> Group:
    """The summary line, the grid (one per block, in plan order, when the sweep has
    blocks), the legend and the corrupt-record notes."""
    if BLOCK in frame.columns:
        grids: list[Text | Table] = []
        for part in frame.partition_by(BLOCK, maintain_order=True):
            runs = f"{part.height} run" + "s" * (part.height != 1)
            grids += [Text(f"block {part[BLOCK][0] or '-'}: {runs}", style="bold"),
                      _grid(part.drop(BLOCK))]
    else:
        grids = [_grid(frame)]
    legend = Text("  ".join(f"{g} {s.lower() if s else 'not started'}" for s, (g, _) in GLYPHS.items()),
                  style="dim")
    legend.append(f"  {RECORDS_MARK[0]} corrupt record file (below)", style="dim")
    return Group(summary(frame, title), *grids, legend, *_relaunch_notes(frame, title), *_record_notes(frame))


def _grid(frame: pl.DataFrame) -> Table:
    """One table, a section per facet (the other axes' values, first columns), rows N,
    columns D/epochs; a cell holds one glyph per run (seeds, members). Only axes that
    vary within ``frame`` appear."""
    row, col, facets = grid_axes(frame)
    rows = sorted(frame[row].unique().to_list(), key=lambda v: _sort_key((v,))) if row else [None]
    cols = sorted(frame[col].unique().to_list(), key=lambda v: _sort_key((v,))) if col else [None]
    table = Table(show_lines=False, padding=(0, 1), caption=f"columns: {col}" if col else None,
                  caption_justify="left")
    for f in facets:
        table.add_column(f.rsplit(".", 1)[-1], justify="right", style="bold cyan")
    table.add_column(row.rsplit(".", 1)[-1] if row else "", justify="right", style="bold")
    for c in cols:
        table.add_column(_fmt(c) if c is not None else "runs", justify="center")
    cells: dict[tuple, list] = {}
    keys = zip(*(frame[k] for k in facets)) if facets else itertools.repeat(())
    notes = frame["records_note"] if "records_note" in frame.columns else itertools.repeat(None)
    for key, r, c, s, n in zip(keys, frame[row] if row else itertools.repeat(None),
                               frame[col] if col else itertools.repeat(None), frame["state"], notes):
        cells.setdefault((key, r, c), []).append((s, n is not None))
    for i, key in enumerate(sorted({k for k, _, _ in cells}, key=_sort_key)):
        if i:
            table.add_section()
        for j, r in enumerate(rows):
            label = [_fmt(v) if j == 0 else "" for v in key]
            table.add_row(*label, _fmt(r) if r is not None else "",
                          *(_cell(cells.get((key, r, c), [])) for c in cols))
    return table


def _relaunch_notes(frame: pl.DataFrame, sweep: str) -> list[Text]:
    """A line with the command that resumes the TIMEOUT runs (a Slurm time limit hit,
    requeues spent: nothing resumes them until a relaunch), when there are any."""
    n = frame.filter(pl.col("state") == "TIMEOUT").height
    if not n:
        return []
    glyph, style = GLYPHS["TIMEOUT"]
    runs = f"{n} run" + "s" * (n != 1)
    return [Text(f"{glyph} {runs} timed out and not requeued: `scalelab retry --preempted {sweep or 'SWEEP'}` "
                 f"(or `scalelab sweep SPEC`) resumes {'them' if n != 1 else 'it'} from the last checkpoint",
                 style=style)]


def _record_notes(frame: pl.DataFrame) -> list[Text]:
    """One line per run whose ``records_note`` is set (the first ``_NOTES_SHOWN``)."""
    if "records_note" not in frame.columns:
        return []
    flagged = frame.filter(pl.col("records_note").is_not_null()).select("run_dir", "records_note")
    lines = [Text(f"{RECORDS_MARK[0]} {d}: {n}", style=RECORDS_MARK[1])
             for d, n in flagged.head(_NOTES_SHOWN).iter_rows()]
    if flagged.height > _NOTES_SHOWN:
        lines.append(Text(f"{RECORDS_MARK[0]} ... and {flagged.height - _NOTES_SHOWN} more runs "
                          "(records_note in scalelab collect's runs.parquet)", style=RECORDS_MARK[1]))
    return lines


def summary(frame: pl.DataFrame, title: str = "") -> Text:
    counts = frame.group_by("state").len().sort("state", nulls_last=True)
    text = Text(f"{title}  " if title else "", style="bold")
    text.append(f"{frame.height} runs: ")
    for state, n in counts.iter_rows():
        glyph, style = GLYPHS.get(state, ("?", "white"))
        text.append(f"{glyph} {n} {state.lower() if state else 'not started'}  ", style=style)
    flagged = frame["records_note"].is_not_null().sum() if "records_note" in frame.columns else 0
    if flagged:
        text.append(f"{RECORDS_MARK[0]} {flagged} with corrupt record files", style=RECORDS_MARK[1])
    return text
