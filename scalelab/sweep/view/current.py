"""Which runs of a sweep directory its latest spec still plans.

``plan.parquet`` keeps the rows of every plan launched into a sweep directory, so the runs
of an edited spec stay visible to ``status`` and can be resumed, and ``collect`` reads
them all. The latest spec is the directory's ``spec.yaml`` (rewritten by each launch):
``collect`` marks the runs it expands to with ``in_spec``, and the analyses leave out the
others (``analysis.tables.runs.drop_stale``) so that, e.g., the students of an earlier
distillation block do not sit beside the current ones in a report.
"""

from __future__ import annotations

from pathlib import Path

from scalelab.errors import UserError
from scalelab.store.layout import spec_file
from scalelab.store.sweep_files import read_sweep_text

__all__ = ["IN_SPEC", "current_run_ids"]

IN_SPEC = "in_spec"
"""Column of runs.parquet: True when the sweep's spec.yaml plans the run now."""


def current_run_ids(sweep_dir: str | Path) -> set[str] | None:
    """Run ids that ``<sweep>/spec.yaml`` expands to; None when there is no copy or it no
    longer plans here (a dataset or teacher that is gone): then nothing is marked stale.
    A copy that fails its manifest (``store.sweep_files.read_sweep_text``) is a one-line
    UserError, never taken for a spec that plans nothing."""
    from scalelab.sweep.plan.datasets import dataset_facts
    from scalelab.sweep.plan.expand import expand
    from scalelab.sweep.spec.load import parse_spec

    path = spec_file(sweep_dir)
    text = read_sweep_text(path)
    if text is None:
        return None
    try:
        spec = parse_spec(text, file=str(path))
        plan = expand(spec, datasets=dataset_facts(spec))
    except (UserError, OSError, ValueError):
        return None
    return set(plan.table["run_id"].to_list())
