"""A quick look at one run directory's record files, for ``scalelab status`` and
``collect`` (so a damaged file never stops either): which pass ``record_files.quick_problem`` (junk and truncated files
do not), and which an earlier attempt set aside as corrupt. Two small reads a file, no
decoding: cheap enough for every run of a 10,000-run sweep.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scalelab.train.records.record_files import SET_ASIDE_MARK, quick_problem
from scalelab.train.records.records import SCHEMAS, part_step

__all__ = ["RecordsCheck", "check_records"]


@dataclass(frozen=True)
class RecordsCheck:
    """The quick look at one run directory's record files (names relative to it)."""

    readable: tuple[str, ...] = ()
    """Record files that passed ``quick_problem``: ``evals.parquet``, ``evals/part-*``."""
    corrupt: tuple[tuple[str, str], ...] = ()
    """(name, reason) of each record file that did not."""
    set_aside: tuple[str, ...] = ()
    """Corrupt files an earlier attempt renamed ``<name>.corrupt-<time>``."""

    @property
    def note(self) -> str | None:
        """One line for ``status``/``collect``, or None when there is nothing to say."""
        said = [f"CORRUPT {name} ({why})" for name, why in self.corrupt]
        if self.set_aside:
            said.append("set aside after corruption: " + ", ".join(self.set_aside))
        return "; ".join(said) or None


_COMPACTED = frozenset(f"{t}.parquet" for t in SCHEMAS)


def check_records(run_dir: str) -> RecordsCheck:
    """``quick_problem`` of every record file of ``run_dir``, and the files set aside.
    Strings and ``os.scandir``, no pathlib: ``status`` runs it on 10,000 runs."""
    readable: list[str] = []
    corrupt: list[tuple[str, str]] = []
    aside: list[str] = []

    def look(name: str, path: str) -> None:
        problem = quick_problem(path)
        if problem is None:
            readable.append(name)
        else:
            corrupt.append((name, problem))

    try:
        entries = sorted((e.name, e.path) for e in os.scandir(run_dir))
    except OSError:  # not started (no directory), or unreadable
        return RecordsCheck()
    for name, path in entries:
        if name in _COMPACTED:
            look(name, path)
        elif SET_ASIDE_MARK in name and name.partition(SET_ASIDE_MARK)[0] in _COMPACTED:
            aside.append(name)
        elif name in SCHEMAS and os.path.isdir(path):
            for child in sorted(os.listdir(path)):
                rel = f"{name}/{child}"
                if part_step(child) is not None:
                    look(rel, os.path.join(path, child))
                elif SET_ASIDE_MARK in child and part_step(child.partition(SET_ASIDE_MARK)[0]) is not None:
                    aside.append(rel)
    return RecordsCheck(tuple(readable), tuple(corrupt), tuple(aside))
