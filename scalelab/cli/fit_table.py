"""The table ``scalelab fit`` prints: one row per group and parameter (analysis.fit.grouped).

Cells are plain text (never rich markup: group values come from the user's runs table).

A parameter the fit left at its box bound is never a bare number: its value reads
``not identified (at upper bound 10)``, its SE and CI are not shown, and the group is
marked ``not identified (alpha at bound)``. A CI end at a bound reads
``10 (bound)``. So is a parameter in the fit's ``not_identified`` (a data-constrained fit's
R_D* or R_N* with a flat profile: analysis/fit/saturation_identified.py): its value reads
``not identified (flat profile ...)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from analysis.fit.diagnostics import bound_side
from analysis.fit.grouped import GroupFit, Selection
from analysis.fit.xvars import X_VARIABLES

__all__ = ["fit_table", "identified_cell", "value_cell", "warning_lines"]


def _num(v: float) -> str:
    return f"{v:.5g}"


def value_cell(g: GroupFit, p: str) -> str:
    """The fitted value of ``p``, or why it is not identified."""
    hit = g.at_bounds.get(p)
    if hit is not None:
        return f"not identified (at {hit[0]} bound {_num(hit[1])})"
    why = g.result.not_identified.get(p)
    if why is not None:  # the reason's head; the whole reason is among the warning lines
        head = why.split(": ", 1)[0]
        return f"not identified ({head if head.count('(') == head.count(')') else why})"
    return _num(g.result.params[p])


def _ci_end(g: GroupFit, p: str, v: float) -> str:
    r = g.result
    i = r.free.index(r.tied.get(p, p))  # a tied parameter shares its target's box
    return f"{_num(v)} (bound)" if bound_side(r.law, p, v, r.lo[i], r.hi[i]) else _num(v)


def identified_cell(g: GroupFit) -> str:
    """``identified``; ``not identified (alpha at bound)``; ``weakly identified (2 warnings)``."""
    if g.at_bounds:
        return f"not identified ({', '.join(g.at_bounds)} at bound)"
    if g.result.not_identified:
        return f"not identified ({', '.join(g.result.not_identified)})"
    n = len(g.result.warnings)
    return f"weakly identified ({n} warning{'s' * (n > 1)})" if n else "identified"


def _group_lines(g: GroupFit, noun: str, grouped: bool) -> list[str]:
    """The group column's lines: label (when grouped), points and R^2, identified."""
    head = [g.label] if grouped else []
    return head + [f"{g.result.n_points} {noun}, R^2 {g.result.r2:.4f}", identified_cell(g)]


def _param_cells(g: GroupFit, p: str) -> list[str]:
    """value, SE, 95% CI of parameter ``p`` (nothing but the reason for one at its bound)."""
    r = g.result
    if p in r.fixed:
        return [_num(r.params[p]), "fixed", "(stage 1)"]
    if p in g.at_bounds or p in r.not_identified or g.boot is None:
        return [value_cell(g, p), "", ""]
    lo, hi = g.boot.ci()[p]
    return [value_cell(g, p), f"{g.boot.se[p]:.3g}", f"[{_ci_end(g, p, lo)}, {_ci_end(g, p, hi)}]"]


def fit_table(sel: Selection, where: Sequence[str] = (), by: Sequence[str] = ()) -> Table:
    """One table for all groups, a row per group and parameter; the group column holds the
    group's label, its point count and R^2, and whether its parameters are identified."""
    noun = "points" if sel.x == "K" else "runs"
    title = f"{sel.law} fit" + (
        f", x = {sel.x}: {X_VARIABLES[sel.x]}" if sel.law == "powerlaw" else ""
    )
    grid = Table(title=title, caption=f"where {' AND '.join(where)}" if where else None)
    grid.add_column("group" if by else "fit", overflow="fold")
    grid.add_column("parameter", no_wrap=True)
    for col in ("value", "SE", "95% CI"):
        grid.add_column(col, overflow="fold")
    for n, g in enumerate(sel.groups):
        if n:
            grid.add_section()
        lines = _group_lines(g, noun, bool(by))
        params = list(g.result.params)
        if len(lines) > len(params):  # fewer parameter rows than lines: join the overflow
            lines = lines[: len(params) - 1] + ["; ".join(lines[len(params) - 1 :])]
        for row, p in enumerate(params):
            lead = lines[row] if row < len(lines) else ""
            grid.add_row(*(Text(c) for c in (lead, p, *_param_cells(g, p))))
    return grid


def warning_lines(sel: Selection, grouped: bool = False) -> list[str]:
    """``warning [group]: ...`` per warning of each group's fit (``[group]`` only when
    grouped); a two-stage fit's warnings hold its stage-1 ones, prefixed "stage 1"
    (fit/constrained.py). A parameter at its bound is among the fit's own warnings
    (diagnostics.bound_warnings), so it is not repeated from ``at_bounds``."""
    lines = []
    for g in sel.groups:
        tag = f" [{g.label}]" if grouped else ""
        lines += [f"warning{tag}: {w}" for w in g.result.warnings]
    return lines
