"""Which runs a precision law (``analysis.fit.precision``) is fitted on: one law per named
recipe that ran two or more precisions. The rule ``report.md``'s precision section uses
(``analysis.report.precision_md``).

The precision law reduces the runs at each (precision, N, D, U) point to that point's best
cell. Fitted over a whole table of two optimizers, that best cell is whichever optimizer
wins at each point: the multipliers are then a mixture of the optimizers' (and mostly the
stronger one's), labelled as the table's, and the question a study of "does fp8 cost Muon
more than AdamW?" asks is not answered. So:

- the groups are the recipes the user named (``rows.named_recipes``: ``--recipe`` filters,
  the runs' ``recipe`` column); each recipe with >= 2 precisions gets its own law;
- a named recipe with one precision gets none, and runs in no named recipe are in no law
  (a note says each);
- when no named recipe holds two precisions (recipes defined by the precision itself, such
  as ``muon-fp8`` and ``muon-bf16``), or no recipes are named (Kim's block layout, blocks:
  layouts of one study, not recipes), the whole table is one group, as before, with a note
  in the first case.

Pure polars: a bad filter raises AnalysisInputError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from analysis.fit.precision import COLUMN as PRECISION_COLUMN
from analysis.recipes.rows import named_recipes

__all__ = ["PrecisionGroup", "precision_groups"]


@dataclass(frozen=True)
class PrecisionGroup:
    """One precision law's runs: ``recipe`` (None: the whole table) and its ``runs``."""

    recipe: str | None
    runs: pl.DataFrame


def _precisions(frame: pl.DataFrame) -> list[str]:
    return sorted(frame[PRECISION_COLUMN].drop_nulls().unique().to_list())


def precision_groups(data: pl.DataFrame, filters: Mapping[str, Sequence[str]] | None = None
                     ) -> tuple[list[PrecisionGroup], list[str]]:
    """(the groups, notes) of runs ``data`` with a ``train.precision`` column (module
    docstring); the groups are [] when ``data`` has fewer than 2 precisions."""
    if PRECISION_COLUMN not in data.columns or len(_precisions(data)) < 2:
        return [], []
    found = named_recipes(data, filters)
    if found is None:
        return [PrecisionGroup(None, data)], []
    groups, single = [], []
    for name, pred in found.predicates.items():
        sub = data.filter(pred)
        kinds = _precisions(sub)
        if len(kinds) >= 2:
            groups.append(PrecisionGroup(name, sub))
        elif sub.height:
            single.append(f"{name} ({kinds[0] if kinds else 'no precision'})")
    if not groups:
        return [PrecisionGroup(None, data)], [
            f"Each recipe ({found.source}) ran one precision ({', '.join(single)}): one law over "
            "all their runs, each (precision, N, D, U) point its best cell across the recipes."]
    notes = [f"One precision, no precision law: {', '.join(single)}."] if single else []
    if outside := data.height - data.filter(pl.any_horizontal(list(found.predicates.values()))).height:
        notes.append(f"{outside} run(s) belong to no recipe ({found.source}): in no precision law.")
    return groups, notes
