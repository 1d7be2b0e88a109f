"""Whether a launched spec is runs of its sweep directory's recorded adaptive study.

``scalelab next`` writes the runs it proposes as a spec with one ``adaptive`` block
(``block``) named like the study, so ``scalelab sweep FILE`` launches them into the study's
sweep directory. ``scalelab sweep`` copies the spec it launches to ``<sweep>/spec.yaml``,
and ``collect`` marks a run ``in_spec`` only when that copy still expands to it
(``scalelab.sweep.view.current``): copying the block would put every earlier run of the
study out of spec. So when every run of the launched spec is a run of the study kept in
``<sweep>/adaptive/study.yaml`` (``record.remember_study``), the copy stays the study's
spec: ``kept_study`` says so, and gives the text to copy.

The study's plan is the whole expansion of ``study.yaml`` (``expand`` with its dataset
facts, unless given), i.e. exactly what ``collect`` expands ``spec.yaml`` to once it is
the study's; runs are compared by run id. No recorded study, one that no longer loads or
plans here, or any launched run outside its plan: None (the launched spec is copied as
before). A recorded study that fails its manifest (``scalelab.store.sweep_files``) is a
one-line ``UserError`` naming it: damage is said, not taken for "no study".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from scalelab.adaptive.record import ADAPTIVE_DIR, STUDY_FILE
from scalelab.errors import UserError
from scalelab.store.sweep_files import read_sweep_text
from scalelab.sweep.plan.datasets import DatasetFacts, dataset_facts
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.spec.load import parse_spec

__all__ = ["KeptStudy", "kept_study"]


@dataclass(frozen=True)
class KeptStudy:
    """The recorded study that holds every launched run."""

    path: Path
    """``<sweep>/adaptive/study.yaml``."""
    text: str
    """Its text: what ``<sweep>/spec.yaml`` keeps."""


def kept_study(sweep_dir: str | Path, run_ids: Iterable[str], *,
               datasets: Mapping[tuple[str, int], DatasetFacts] | None = None) -> KeptStudy | None:
    """The study recorded in ``sweep_dir`` when its plan holds every one of ``run_ids``
    (at least one); else None (module docstring). ``datasets``: the facts to expand the
    study with (default: ``dataset_facts`` of the study's spec, as ``collect`` does)."""
    path = Path(sweep_dir) / ADAPTIVE_DIR / STUDY_FILE
    wanted = set(run_ids)
    if not wanted or not path.is_file():
        return None
    text = read_sweep_text(path)  # checked against its manifest; damage raises
    if text is None:
        return None
    try:
        spec = parse_spec(text, file=str(path))
        plan = expand(spec, datasets=dataset_facts(spec) if datasets is None else datasets)
    except (UserError, OSError, ValueError):
        return None
    if not wanted <= set(plan.table["run_id"].to_list()):
        return None
    return KeptStudy(path, spec.text or text)
