"""The plan as a rich table: what ``scalelab sweep SPEC --dry-run`` prints.

One row per run (the first and last ``max_rows // 2`` when there are more): run id,
name, the axis values, N, D_unique, D_total, epochs, steps, FLOPs, GPU-hours, the run's
resources (``scalelab.sweep.resources.describe``) and, when ``decisions``
(``scalelab.sweep.launch.decide``) are given, the action and its reason. The caption sums
the plan: runs, total FLOPs, total GPU-hours, launch/skip counts, then one line per
resource group (runs with one launcher: one job array, or more past MaxArraySize).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl
from rich.table import Table

from scalelab.sweep import resources
from scalelab.sweep.plan import Plan

__all__ = ["human", "plan_summary", "render_plan"]

_STATS = (("N", "N"), ("D_unique", "D_unique"), ("D_total", "D_total"), ("epochs", "E"),
          ("steps", "steps"), ("flops", "FLOPs"), ("gpu_hours", "GPU-h"), ("micro_batch", "micro"),
          ("gpu_gib", "GiB/GPU"))


def human(x: Any) -> str:
    """Compact number: 154.1M, 2.1e+19, 0.003; '-' for null."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    a = abs(x)
    if a >= 1e15:
        return f"{x:.3g}"
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if a >= div:
            return f"{x / div:.4g}{suffix}"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


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


def render_plan(plan: Plan, decisions: pl.DataFrame | None = None, *,
                max_rows: int = 60) -> Table:
    """The plan table; ``decisions`` (run_id, action, reason) adds the last two columns."""
    launchers = resources.launchers_of(plan, plan.spec.launcher)
    t = plan.table.with_columns(pl.Series("resources", [resources.describe(x) for x in launchers],
                                          dtype=pl.String))
    if decisions is not None:
        t = t.join(decisions.select("run_id", "action", "reason"), on="run_id", how="left",
                   maintain_order="left")
    title = f"plan: {plan.spec.name}"
    caption = "\n".join([plan_summary(plan, decisions), "resources (one Slurm job array per line):",
                         *(f"  {line}" for line in resources.summary(launchers, plan.spec.launcher))])
    table = Table(title=title, caption=caption, caption_justify="left", show_lines=False)
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
    if len(rows) > max_rows:
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
