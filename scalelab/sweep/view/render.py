"""The plan as rich renderables: what ``scalelab sweep SPEC --dry-run`` prints.

- ``render_overview`` (the default): one row per (block, model size) with the run count,
  N, the range of total tokens D, total FLOPs, GPU-hours and peak GiB per GPU, then one
  compact column per axis that varies (a value, or ``×k`` for k values, listed under the
  table), block subtotals and a total row (their D: the sum of the runs' D, ``Σ``) (``scalelab.sweep.view.plan_view``
  aggregates).
- ``render_plan`` (``--runs``): one row per run: run id, name, the axis values, N,
  D_unique, D_total, epochs, steps, FLOPs, GPU-hours, micro-batch, GiB per GPU, the run's
  resources (``scalelab.sweep.plan.resources.describe``) and, when ``decisions``
  (``scalelab.sweep.run.launch.decide``) are given, the action and its reason.

Both end with the summary of the plan: runs, total FLOPs, total GPU-hours, the peak GiB
per GPU, launch/skip counts, then one line per resource group (runs with one launcher: one
job array, or more past MaxArraySize).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from scalelab.sweep.plan import resources
from scalelab.sweep.plan.table import Plan
from scalelab.sweep.view import plan_view

__all__ = ["axis_labels", "human", "plan_summary", "render_overview", "render_plan"]

_STATS = (("N", "N"), ("D_unique", "D_unique"), ("D_total", "D_total"), ("epochs", "E"),
          ("steps", "steps"), ("flops", "FLOPs"), ("gpu_hours", "GPU-h"), ("micro_batch", "micro"),
          ("gpu_gib", "GiB/GPU"))
_LABELS = {"optim.lr": "lr", "optim.weight_decay": "wd", "data.unique_tokens": "U", "optim.name": "optim",
           "train.batch_size": "bs", "data.seq_len": "T", "optim.scion_radii": "rho"}
"""Compact headers of axis columns; any other axis is shown by its last dotted part."""
_RESOURCES_TITLE = "resources (one Slurm job array per line):"
_NAME_COLUMNS = ("block", "size")
"""Overview columns that name what a row is: never cut."""
_UNBOUNDED = 100_000
"""A width no plan table reaches: the width to measure a table's natural width at."""


def human(x: Any, digits: int = 4) -> str:
    """Compact number: 154.1M, 2.1e19, 0.003 (``digits`` significant digits, one fewer
    from 1e15 on); '-' for null."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    a = abs(x)
    if a >= 1e15:
        return _sci(x, digits - 1)
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if a >= div:
            return f"{x / div:.{digits}g}{suffix}"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def axis_labels(axes: Sequence[str]) -> list[str]:
    """Compact headers for ``axes`` (lr, wd, U, epochs, ...); the full name where two
    would read the same."""
    short = [_LABELS.get(a, a.rsplit(".", 1)[-1]) for a in axes]
    return [s if short.count(s) == 1 else a for a, s in zip(axes, short)]


def plan_summary(plan: Plan, decisions: pl.DataFrame | None = None) -> str:
    """One line: run count, total FLOPs, GPU-hours, the largest predicted GiB per GPU, and
    launch/skip counts."""
    t = plan.table
    parts = [f"{t.height} runs", f"{human(t['flops'].sum())} FLOPs"]
    hours = t["gpu_hours"]
    if t.height and hours.null_count() < t.height:
        parts.append(f"{hours.sum():,.0f} GPU-hours" if hours.sum() >= 10
                     else f"{hours.sum():.3g} GPU-hours")
    if t.height and "gpu_gib" in t.columns:
        parts.append(f"peak {t['gpu_gib'].max():.1f} GiB/GPU")
    if decisions is not None and decisions.height:
        counts = dict(decisions.group_by("action").len().iter_rows())
        parts.append(f"launch {counts.get('launch', 0)}, skip {counts.get('skip', 0)}")
    return " · ".join(parts)


def render_overview(plan: Plan, decisions: pl.DataFrame | None = None) -> Group:
    """The default dry-run view: the (block, size) table, the values behind its ``×k``
    cells, then the plan summary and resource groups (``decisions`` add launch/skip)."""
    swept = _swept_axes(plan)
    runs = plan_view.effective(plan.table, plan.configs, swept)
    rows = plan_view.by_size(runs, swept)
    axes = plan_view.varying_axes(runs, swept)
    blocks = plan_view.BLOCK in rows.columns
    sizes = bool(rows["presets"].list.len().max()) or not blocks  # the first column when alone
    hours = rows["gpu_hours"].null_count() < rows.height  # no GPU-h column without throughput
    title = Text(f"plan: {plan.spec.name} (D: total tokens; GiB: predicted peak per GPU)")
    columns = [("size", "left")] * sizes + [(h, "right") for h in (
        "runs", "N", "D", "FLOPs", *["GPU-h"] * hours, "GiB", *axis_labels(axes))]
    groups = rows.partition_by(plan_view.BLOCK, maintain_order=True) if blocks else [rows]
    sections = []
    for group in groups:
        lines = [([", ".join(row["presets"])] * sizes + _stats(row, human(row["N"], 3), hours)
                  + [_axis_cell(row[a]) for a in axes], None) for row in group.iter_rows(named=True)]
        if group.height > 1 and blocks:
            lines.append(([""] * sizes + _stats(plan_view.subtotal(group), "", hours, total=True), "bold"))
        sections.append(_Section(group[plan_view.BLOCK][0] if blocks else None, lines))
    total = _stats(plan_view.subtotal(rows), "", hours, total=True)
    view = _SizeTable(columns, sections, total)
    return Group(title, view, *_legend(rows, axes), Text(""), _footer(plan, decisions))


def _swept_axes(plan: Plan) -> tuple[str, ...]:
    """The plan's axes that some grid, zip or derive rule sets: not the keys a block sets in
    its base (the plan carries them as columns for the recipes, ``scalelab.sweep.plan.blocks``;
    the block's name already says what they are)."""
    specs = [s for _, s in plan.spec.blocks] if plan.spec.blocks else [plan.spec]
    keys = {k for s in specs for k in (*s.grid, *(k for group in s.zip for k in group),
                                       *(s.derive or {}))}
    return tuple(a for a in plan.axes if a in keys or "." not in a)


@dataclass(frozen=True)
class _Section:
    """One block's rows of the overview: (cells, style) per row, its subtotal last."""

    block: str | None
    lines: list[tuple[list[str], str | None]]


class _SizeTable:
    """The overview's (block, size) table, never cutting a block or size name.

    Where the console is not a terminal (a pipe, a log file) it renders at its natural
    width, whatever the console's width: a saved plan keeps every column whole. On a
    terminal it is one table with a ``block`` column when that fits; otherwise the block
    names become lines of their own above their rows (the columns aligned across blocks),
    and the name columns keep their full width while the number columns give way."""

    def __init__(self, columns: list[tuple[str, str]], sections: list[_Section], total: list[str]):
        self.columns, self.sections = columns, sections
        self.blocks = sections[0].block is not None
        self.total = [""] * (columns[0][0] == "size") + total
        """The total row's cells, its name cell (if any) blank."""
        rows = [[h for h, _ in columns], *(c for s in sections for c, _ in s.lines), self.total]
        self.widths = [max(cell_len(r[i]) for r in rows if i < len(r)) for i in range(len(columns))]
        """Per column, its widest cell: one width for every block's table."""

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._wide())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = self._wide()
        natural = Measurement.get(console, options.update_width(_UNBOUNDED), wide).maximum
        if not console.is_terminal:
            yield from console.render(wide, options.update_width(max(natural, options.max_width)))
        elif natural <= options.max_width or not self.blocks:
            yield wide
        else:
            yield from self._stacked()

    def _wide(self) -> Table:
        """One table, the block in the first column (its name on the block's first row)."""
        if not self.blocks:
            return self._filled(self._table(self.columns, self.widths), self.sections,
                                ["total", *self.total[1:]])
        width = max(cell_len(name) for name in ["total", *(b.block for b in self.sections)])
        table = self._table([("block", "left"), *self.columns], [width, *self.widths])
        for section in self.sections:
            for i, (cells, style) in enumerate(section.lines):
                table.add_row(section.block if i == 0 else "", *cells, style=style)
            table.add_section()
        table.add_row("total", *self.total, style="bold")
        return table

    def _stacked(self) -> RenderResult:
        """One table per block under a line naming it, every column at one fixed width."""
        yield self._table(self.columns, self.widths, fixed=True)
        for section in self.sections:
            yield Text(section.block or "", style="bold")
            yield self._filled(self._table(self.columns, self.widths, fixed=True, header=False),
                               [section])
        yield Text("total", style="bold")
        yield self._filled(self._table(self.columns, self.widths, fixed=True, header=False), [],
                           self.total)

    @staticmethod
    def _filled(table: Table, sections: list[_Section], total: list[str] | None = None) -> Table:
        """``table`` with the rows of ``sections``, then ``total`` (bold) if given."""
        for section in sections:
            for cells, style in section.lines:
                table.add_row(*cells, style=style)
            table.add_section()
        if total is not None:
            table.add_row(*total, style="bold")
        return table

    @staticmethod
    def _table(columns: list[tuple[str, str]], widths: list[int], *, fixed: bool = False,
               header: bool = True) -> Table:
        """A table of ``columns`` (header, justify). A name column (block, size) is never
        narrower than its width; ``fixed``: every other column at its width too (the
        stacked tables align), else at its content's."""
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                      collapse_padding=True, show_header=header)
        for (head, justify), width in zip(columns, widths):
            name = head in _NAME_COLUMNS
            table.add_column(head, justify=justify, no_wrap=True, min_width=width if name else None,
                             width=width if fixed and not name else None)
        return table


def render_plan(plan: Plan, decisions: pl.DataFrame | None = None, *,
                max_rows: int | None = 60) -> Table:
    """The per-run table (``max_rows``: the first and last half of them; None: all);
    ``decisions`` (run_id, action, reason) adds the last two columns."""
    launchers = resources.launchers_of(plan, plan.spec.launcher)
    t = plan.table.with_columns(pl.Series("resources", [resources.describe(x) for x in launchers],
                                          dtype=pl.String))
    if decisions is not None:
        t = t.join(decisions.select("run_id", "action", "reason"), on="run_id", how="left",
                   maintain_order="left")
    caption = "\n".join([plan_summary(plan, decisions), _RESOURCES_TITLE,
                         *_resource_lines(plan, launchers)])
    table = Table(title=f"plan: {plan.spec.name}", caption=caption, caption_justify="left",
                  show_lines=False)
    axes = [a for a in plan.axes if a in t.columns]
    columns = ["run_id", "name", *axes, *(c for c, _ in _STATS), "resources"]
    headers = ["run_id", "name", *axes, *(h for _, h in _STATS), "resources"]
    if decisions is not None:
        columns += ["action", "reason"]
        headers += ["action", "reason"]
    for i, h in enumerate(headers):
        numeric = columns[i] in dict(_STATS) or columns[i] in axes
        table.add_column(h, justify="right" if numeric else "left", no_wrap=columns[i] != "reason")
    rows = t.select(columns).rows()
    if max_rows is not None and len(rows) > max_rows:
        half = max(1, max_rows // 2)
        skipped = len(rows) - 2 * half
        rows = rows[:half] + [None] + rows[-half:]
    else:
        skipped = 0
    for row in rows:
        if row is None:
            table.add_row("…", f"({skipped} more runs)", *[""] * (len(columns) - 2))
            continue
        cells = [_cell(c, v) for c, v in zip(columns, row)]
        style = None
        if decisions is not None:
            style = "dim" if row[-2] == "skip" else None
        table.add_row(*cells, style=style)
    return table


def _resource_lines(plan: Plan, launchers: list | None = None) -> list[str]:
    launchers = resources.launchers_of(plan, plan.spec.launcher) if launchers is None else launchers
    return [f"  {line}" for line in resources.summary(launchers, plan.spec.launcher)]


def _footer(plan: Plan, decisions: pl.DataFrame | None) -> Text:
    lines = [plan_summary(plan, decisions), _RESOURCES_TITLE, *_resource_lines(plan)]
    return Text("\n".join(lines))


def _legend(rows: pl.DataFrame, axes: Sequence[str]) -> list[Table]:
    """The values behind the ``×k`` cells, per block and axis (none: no table)."""
    values = plan_view.block_values(rows, axes)
    if not values:
        return []
    table = Table(box=None, show_header=False, pad_edge=False)
    for _ in ("block", "axis", "values"):
        table.add_column()
    labels = dict(zip(axes, axis_labels(axes)))
    previous = object()
    for block, axis, vals in values:
        shown = "" if block == previous else (block or "")
        previous = block
        table.add_row(shown, labels[axis], " ".join(_value(v) for v in vals))
    return [Text(""), Text("×k: the k values of the axis in that row"), table]


def _stats(row: dict[str, Any], n: str, hours_column: bool = True, *, total: bool = False) -> list[str]:
    """runs, N (given), D (a row: the range of its runs' D; a ``total`` row: their sum, the
    tokens the plan trains on), FLOPs, GPU-h (when ``hours_column``) and GiB per GPU cells of
    a ``plan_view.by_size`` row or ``subtotal``."""
    if total:
        d = f"Σ {human(row['D_sum'], 3)}"
    else:
        d = human(row["D_min"], 3)
        if row["D_max"] != row["D_min"]:
            d += f"..{human(row['D_max'], 3)}"
    hours, gib = row["gpu_hours"], row["gpu_gib"]
    cells = [f"{row['runs']:,}", n, d, _sci(row["flops"], 2)]
    if hours_column:
        cells.append("-" if hours is None else f"{hours:,.0f}" if hours >= 10 else f"{hours:.2g}")
    return [*cells, "-" if gib is None else f"{gib:.1f}"]


def _axis_cell(values: list) -> str:
    """One value as itself, several as ``×k`` (listed under the table)."""
    if len(values) > 1:
        return f"×{len(values)}"
    return _value(values[0]) if values else ""


def _value(x: Any) -> str:
    """An axis value, short: 1e-4, 0.03, 6.4, 64, 419M, adamw."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return human(x, 3) if abs(x) >= 1000 else str(x)
    if isinstance(x, float):
        if x == 0 or (x.is_integer() and abs(x) < 10_000):
            return str(int(x))
        return _sci(x, 2) if abs(x) < 1e-2 or abs(x) >= 1e4 else f"{x:.3g}"
    if isinstance(x, (list, tuple, pl.Series)):
        return ",".join(_value(v) for v in x)
    return str(x)


def _sci(x: float, digits: int) -> str:
    """``x`` in scientific notation with ``digits`` significant digits: 1.2e20, 3e-4."""
    mantissa, exponent = f"{x:.{max(digits - 1, 0)}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def _cell(column: str, value: Any) -> str:
    if column == "steps" and isinstance(value, int):
        return f"{value:,}"
    if column == "epochs" and isinstance(value, float):
        return f"{value:.4g}"
    if column in ("run_id", "name", "action", "reason", "resources"):
        return "" if value is None else str(value)
    if isinstance(value, float) and column not in dict(_STATS):
        return f"{value:.4g}"
    return human(value)
