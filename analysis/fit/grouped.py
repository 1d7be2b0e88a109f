"""Select runs, split them into groups, fit a law per group (``scalelab fit``'s engine).

``fit_selection`` runs the pipeline on a runs table (or, for x = K, an ensemble table):

1. x columns (D, U, C; or K) are added, so conditions and groups can name them;
2. ``--where`` conditions (analysis.tables.select) keep the matching rows;
3. fit-ready rows: COMPLETED, finite positive x and loss (analysis.tables.runs / xvars), each
   exclusion counted in a note;
4. ``--group-by`` columns split them; EVERY group is checked to hold more points than the
   law has free parameters (``fit.require_points``) before any is fitted;
5. one fit per group, its bootstrap (when asked), and the free parameters it left at a box
   bound (``diagnostics.at_bounds``: not identified, never to be shown as bare numbers);
6. a note per group whose runs at one point of the law's variables differ in another setting
   (``mixed_settings_note``, read from the table itself: an lr grid, several D under a law in
   N): the law fits them as replicates of one setting, so its loss is their average.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from analysis.errors import AnalysisInputError, did_you_mean
from analysis.fit.bootstrap import BootstrapResult
from analysis.fit.diagnostics import at_bounds
from analysis.fit.fit import FitResult, require_points
from analysis.fit.xvars import X_SOURCES, ensemble_points, fit_ready, law_fitter, with_x_columns
from analysis.laws.laws import LAW_NAMES
from analysis.tables.cells import differing_settings, setting_columns
from analysis.tables.external import CONFIG_PREFIX
from analysis.tables.select import select_runs

__all__ = ["GroupFit", "Selection", "fit_selection", "group_label", "group_runs", "mixed_settings_note"]


@dataclass(frozen=True)
class GroupFit:
    """One group's fit. ``key``: group-by column -> value (empty when not grouped)."""

    key: dict[str, Any]
    data: pl.DataFrame
    result: FitResult
    boot: BootstrapResult | None
    at_bounds: dict[str, tuple[str, float]]
    """Free parameter -> (side, natural bound) for those the fit left at a box bound."""

    @property
    def label(self) -> str:
        return group_label(self.key)

    @property
    def identified(self) -> bool:
        """No parameter at a bound and no identifiability warning."""
        return not self.at_bounds and not self.result.warnings


@dataclass(frozen=True)
class Selection:
    """What ``fit_selection`` did: the law, its x, the notes and the per-group fits."""

    law: str
    x: str
    notes: tuple[str, ...]
    n_selected: int
    groups: tuple[GroupFit, ...]


def group_label(key: dict[str, Any]) -> str:
    """``recipe=standard, D=2048`` (floats to 4 significant digits); ``all`` for no key."""
    parts = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in key.items()]
    return ", ".join(parts) or "all"


def group_runs(
    frame: pl.DataFrame, by: Sequence[str] = ()
) -> list[tuple[dict[str, Any], pl.DataFrame]]:
    """``frame`` split by the columns ``by`` (nulls form a group of their own), sorted by
    key; ``[({}, frame)]`` when ``by`` is empty. Unknown columns: one line, did-you-mean."""
    for col in by:
        if col not in frame.columns:
            raise AnalysisInputError(
                f"group-by: unknown column '{col}'{did_you_mean(col, frame.columns)}; "
                f"the table has {sorted(frame.columns)}"
            )
    if not by:
        return [({}, frame)]
    keys = list(dict.fromkeys(by))
    parts = frame.partition_by(keys, maintain_order=True, as_dict=True)
    groups = [(dict(zip(keys, key)), part) for key, part in parts.items()]
    return sorted(groups, key=lambda g: tuple((v is None, str(v)) for v in g[0].values()))


_SHOWN = {"D_total": "D", "D_unique": "U", "flops": "C"}  # prepare_runs' copies, by their x names


def mixed_settings_note(part: pl.DataFrame, variables: Sequence[str], by: Sequence[str] = ()) -> str | None:
    """A note when the runs of ``part`` at one point of ``variables`` (the law's inputs, e.g.
    N, D, U) differ in another setting (``tables.cells.setting_columns``: config columns and
    repeated numeric columns of the table itself), or None. Such runs are fitted as seeds of
    one setting: an lr grid's untuned runs raise the law's loss, and several D under a law in
    N alone average the budgets."""
    keys = [v for v in variables if v in part.columns]
    if not keys or part.height < 2:
        return None
    skip = {*keys, *(X_SOURCES[v] for v in keys if v in X_SOURCES), *by, "block",
            *(f"{CONFIG_PREFIX}{k}" for k in by)}
    other = setting_columns(part, skip)
    if {"D_total", "D_unique"} <= set(other) and (part["D_total"] == part["D_unique"]).all():
        other.remove("D_unique")  # a plain table's U is its D
    if not other:
        return None
    differ, n, points = differing_settings(part, keys, other)
    if not differ:
        return None
    names = list(dict.fromkeys(_SHOWN.get(c, c) for c in differ
                               if not (c.startswith(CONFIG_PREFIX) and c[len(CONFIG_PREFIX):] in differ)))
    point = f"({', '.join(keys)})" if len(keys) > 1 else keys[0]
    return (f"{n} of {points} {point} point(s) hold runs that differ in {', '.join(names)}: "
            f"the law fits them as seeds of one setting (their average loss); select one with --where, "
            f"split them with --group-by, or let `scalelab report` fit each point's best cell")


def fit_selection(
    table: pl.DataFrame,
    *,
    law: str = "powerlaw",
    x: str | None = None,
    where: Sequence[str] = (),
    by: Sequence[str] = (),
    loss: str = "final_loss",
    bootstrap: int = 0,
    seed: int = 0,
) -> Selection:
    """Fit ``law`` over ``x`` to the rows of ``table`` meeting ``where``, once per group of
    ``by``. ``table``: a runs table, or for x = K the ensemble table. Raises
    AnalysisInputError (TooFewPointsError for an underdetermined group) on bad input."""
    fitter = law_fitter(law, x)
    if bootstrap < 0 or bootstrap == 1:
        raise AnalysisInputError(f"bootstrap must be 0 or >= 2, got {bootstrap}")
    source = ensemble_points(table) if fitter.x == "K" else with_x_columns(table)
    selected = select_runs(source, where)
    ready = fit_ready(selected, fitter.x, loss=loss)
    noun = "points" if fitter.x == "K" else "runs"
    what = f"{noun} after --where" if where else f"fit-ready {noun}"
    if ready.data.height == 0:
        raise AnalysisInputError(f"0 {what}: none is COMPLETED with a finite {fitter.x} and loss")
    groups = group_runs(ready.data, by)
    for key, part in groups:
        if fitter.n_free is not None:
            in_group = f" in group {group_label(key)}" if key else ""
            require_points(part.height, fitter.n_free, fitter.law, what + in_group)
    fits, notes = [], list(ready.notes)
    variables = (fitter.x,) if fitter.law == "powerlaw" else LAW_NAMES[fitter.law]().columns
    for key, part in groups:
        if note := mixed_settings_note(part, variables, by):
            notes.append(f"{group_label(key)}: {note}" if key else note)
        try:
            result = fitter.fit(part)
        except AnalysisInputError as err:
            if not key:
                raise
            raise AnalysisInputError(f"{group_label(key)}: {err}") from None
        boot = result.bootstrap(bootstrap, seed=seed) if bootstrap >= 2 else None
        fits.append(GroupFit(key, part, result, boot, at_bounds(result)))
    return Selection(fitter.law, fitter.x, tuple(notes), selected.height, tuple(fits))
