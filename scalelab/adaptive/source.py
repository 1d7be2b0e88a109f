"""SWEEP, as ``scalelab next`` takes it, -> the study's spec and its sweep directory.

- a spec file: that spec; its sweep directory as ``scalelab sweep`` names it
  (``sweep_dir_for``: ``--root``, ``$SCALELAB_ROOT``, ``launcher.root``, ./runs);
- a table of runs (.csv, .parquet): refused in one line (it names no candidates);
- a sweep directory: the spec kept in ``<sweep>/adaptive/study.yaml`` (written by every
  ``next`` and adaptive loop), else the directory's ``spec.yaml``.

The study's spec is kept because ``scalelab sweep BLOCK.yaml`` replaces the directory's
``spec.yaml`` with the launched block (which is not the study): a ``spec.yaml`` that is
such a block, with no study kept, is refused with what to give instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scalelab.adaptive.block import BLOCK_NAME
from scalelab.adaptive.record import ADAPTIVE_DIR, STUDY_FILE
from scalelab.errors import UserError
from scalelab.store.layout import SPEC_FILE
from scalelab.store.sweep_files import read_sweep_text
from scalelab.sweep.run.launch import sweep_dir_for
from scalelab.sweep.spec.load import Spec, load_spec, parse_spec

__all__ = ["Source", "resolve"]


@dataclass(frozen=True)
class Source:
    spec: Spec
    sweep_dir: Path


def resolve(path: Path, *, root: Path | None = None) -> Source:
    """The study's spec and sweep directory of SWEEP ``path`` (module docstring)."""
    from analysis.tables.external import is_table_path

    path = Path(path)
    if is_table_path(path) and not path.is_dir():  # a runs table names no candidates to propose
        raise UserError("a table of runs: `scalelab next` proposes runs of a sweep; give its spec "
                        "file (.yaml) or its sweep directory", file=str(path))
    if path.is_file():
        spec = load_spec(path)
        return Source(spec, sweep_dir_for(spec.name, root=root, launcher_root=spec.launcher.root))
    if not path.is_dir():
        raise UserError(f"{path}: no such sweep directory or spec file")
    kept = path / ADAPTIVE_DIR / STUDY_FILE
    copy = kept if kept.is_file() else path / SPEC_FILE
    if not copy.is_file():
        raise UserError(f"{path}: no {SPEC_FILE} here; give the study's spec file instead")
    # the kept study or the sweep's copy: each checked against its manifest (store.sweep_files)
    spec = parse_spec(read_sweep_text(copy) or "", file=str(copy))
    names = [name for name, _ in spec.blocks]
    if (copy != kept and names and not spec.grid
            and all(n == BLOCK_NAME or n.startswith(f"{BLOCK_NAME}-") for n in names)):
        raise UserError(f"{copy}: is an adaptive block written by `scalelab next`, not the "
                        "study; give the study's spec file instead")
    return Source(spec, path)
