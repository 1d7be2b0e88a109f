"""Sweep-level files prove their integrity: each has a manifest beside it.

``spec.yaml`` (the copy of the latest launch's spec), ``plan.parquet``, ``runs.parquet``,
``ensembles/evals.parquet`` and an adaptive study's ``adaptive/study.yaml``,
``adaptive/trajectory.parquet`` and ``adaptive/round-NNN.parquet`` are each written with
``<name>.manifest.json`` beside them (``manifest_of``): the file's name, size and sha256,
written last and atomically, by whoever wrote the file (``scalelab.sweep.run.start`` the
spec copy, ``scalelab.sweep.run.launch`` the plan, ``scalelab.sweep.view.collect`` the runs
table, ``scalelab.ensemble.evaluate`` the ensembles' losses, ``scalelab.adaptive.record``
the adaptive state; through ``scalelab.store.sweep_files``).
Every reader reads the file once, whole (``analysis.tables.bounded_read``: bounded, never
blocking), checks those bytes against the manifest and decodes the same bytes
(``read_verified``): one flipped bit anywhere in the file is a one-line
``SweepManifestError`` naming the file and what to do, never a silently changed plan, spec
or runs table.

- ``plan.parquet``, ``spec.yaml``: ``scalelab sweep SPEC`` writes both again from the spec
  (runs already done keep their directories: a run id is the hash of its config).
- ``runs.parquet`` is derived: a runs table that fails its manifest is stale
  (``scalelab.sweep.view.collect.runs_table_stale``) and collected again.
- ``ensembles/evals.parquet`` feeds the ensemble verdicts of ``report``, ``compare`` and
  ``fit --x K``: a damaged one is refused, naming ``scalelab ensemble SWEEP``, which
  evaluates the members again (their checkpoints carry manifests of their own).
- ``adaptive/study.yaml`` is the study that ``scalelab next SWEEP_DIR`` continues and that
  ``scalelab sweep`` keeps as the sweep's spec when it launches ``next``'s block: a damaged
  one is refused, naming ``scalelab next SPEC`` with the study's own spec file, which
  records it again. ``adaptive/trajectory.parquet`` is read back to append each round: a
  damaged one is refused, never extended (moved aside, the loop starts a new one; every
  round's state is also in its round file). The round files are records only (no command
  reads them): their manifests let an audit check them.

A manifest that is itself damaged (not JSON, another file's name) fails the same way.
Writers of one sweep directory hold its lock (``sweep_lock``: an exclusive ``flock`` on
``.sweep-files.lock``) from the file to its manifest, so two writers never interleave; a
reader that finds a file and its manifest disagreeing reads both again under the shared
lock before it says so, so a writer caught between the two is not taken for damage.

Not covered: ``adaptive/next.yaml`` (a spec the user launches, checked as any spec is)
and the report's and fit's outputs (written from verified inputs, read by no command as
input). A sweep directory from before these manifests has
none: its spec copy, plan and ensembles' losses are read as before (unverified) until the
next ``scalelab sweep`` or ``scalelab ensemble`` writes them with manifests; its runs table
without a manifest is stale, so the next command collects it again, with one (a
runs.parquet with no plan.parquet beside it, nothing to collect from, is read as it is).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import AnalysisInputError
from analysis.tables.bounded_read import LIMITS, Unreadable, read_bounded
from analysis.tables.layout import (
    ADAPTIVE_FOLDER,
    ADAPTIVE_STUDY_FILE,
    ADAPTIVE_TRAJECTORY_FILE,
    ENSEMBLE_EVALS_FILE,
    ENSEMBLES_FOLDER,
    PLAN_FILE,
    RUNS_FILE,
    SPEC_FILE,
)

__all__ = ["COVERED", "FORMAT", "MANIFEST_SUFFIX", "SweepManifestError", "Verified", "hint_for", "manifest_doc",
           "manifest_of", "read_verified", "sweep_lock", "verify_bytes"]

MANIFEST_SUFFIX = ".manifest.json"
"""``plan.parquet`` -> ``plan.parquet.manifest.json``, beside it."""
FORMAT = 1
COVERED = (SPEC_FILE, PLAN_FILE, RUNS_FILE, f"{ENSEMBLES_FOLDER}/{ENSEMBLE_EVALS_FILE}",
           f"{ADAPTIVE_FOLDER}/{ADAPTIVE_STUDY_FILE}", f"{ADAPTIVE_FOLDER}/{ADAPTIVE_TRAJECTORY_FILE}",
           f"{ADAPTIVE_FOLDER}/round-NNN.parquet")
"""The sweep-level files written with a manifest (module docstring: why not the others)."""
LOCK_FILE = ".sweep-files.lock"
"""The lock writers of a sweep directory's files hold (``sweep_lock``)."""

HINTS = {
    SPEC_FILE: "run `scalelab sweep SPEC` with the sweep's spec to write it again",
    PLAN_FILE: "run `scalelab sweep SPEC` with the sweep's spec to plan it again (runs already "
               "done are kept)",
    RUNS_FILE: "run `scalelab collect SWEEP` to collect it again",
    f"{ENSEMBLES_FOLDER}/{ENSEMBLE_EVALS_FILE}": "run `scalelab ensemble SWEEP` to evaluate the ensembles again",
    f"{ADAPTIVE_FOLDER}/{ADAPTIVE_STUDY_FILE}": "run `scalelab next SPEC` with the study's own spec file to "
                                                "record it again",
    f"{ADAPTIVE_FOLDER}/{ADAPTIVE_TRAJECTORY_FILE}": "move it aside and the adaptive loop starts a new one (each "
                                                     "round's state is also in its round-NNN.parquet)",
}
"""What to do about a damaged file, by its path under the sweep directory (``hint_for``)."""


def hint_for(path: str | Path) -> str:
    """``HINTS``' line for the sweep-level file ``path`` ("" for another file): a run's own
    ``evals.parquet`` is not the sweep's ``ensembles/evals.parquet``, nor a spec file named
    ``study.yaml`` the adaptive study's."""
    path = Path(path)
    return HINTS.get(f"{path.parent.name}/{path.name}") or HINTS.get(path.name, "")


class SweepManifestError(AnalysisInputError):
    """A sweep-level file that does not match its manifest; ``path`` and ``reason`` as
    attributes, ``str``: ``<path>: <reason>; <what to do>``."""

    def __init__(self, path: str | Path, reason: str):
        self.path, self.reason = str(path), reason
        hint = hint_for(path)
        super().__init__(f"{path}: {reason}" + (f"; {hint}" if hint else ""))


@dataclass(frozen=True)
class Verified:
    """A sweep-level file's bytes, read once; ``checked`` True when its manifest vouched
    for them, False when it has no manifest (a sweep from before manifests)."""

    data: bytes
    checked: bool


def manifest_of(path: str | Path) -> Path:
    """The manifest beside the sweep-level file ``path``."""
    path = Path(path)
    return path.with_name(path.name + MANIFEST_SUFFIX)


def manifest_doc(name: str, data: bytes) -> dict:
    """The manifest of the file ``name`` holding ``data``."""
    return {"format": FORMAT, "file": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _expected(path: Path) -> tuple[dict | None, tuple]:
    """The manifest of ``path`` (None when there is none) and its stamp; a damaged one
    raises ``SweepManifestError``."""
    where = manifest_of(path)
    try:
        found = read_bounded(where, LIMITS["state"])
    except FileNotFoundError:
        return None, ()
    except (Unreadable, OSError) as err:
        raise SweepManifestError(path, f"its manifest {where.name} is unreadable ({err})") from None
    try:
        doc = json.loads(found.data)
    except ValueError:
        doc = None
    ok = (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("file") == path.name
          and type(doc.get("size")) is int and isinstance(doc.get("sha256"), str))
    if not ok:
        raise SweepManifestError(path, f"its manifest {where.name} is damaged")
    return doc, found.stamp


def verify_bytes(path: str | Path, data: bytes, doc: dict) -> str | None:
    """Why ``data`` is not the file ``doc`` describes, or None."""
    if len(data) != doc["size"]:
        return f"{len(data)} bytes, its manifest {manifest_of(path).name} says {doc['size']}"
    if hashlib.sha256(data).hexdigest() != doc["sha256"]:
        return f"sha256 differs from its manifest {manifest_of(path).name} (the file is damaged)"
    return None


_HELD: dict[str, int] = {}
"""Sweep directories whose lock this process holds (and how deeply): a reader inside a
writer's ``sweep_lock`` takes no lock again (``flock`` on a second descriptor of the file
would wait for the first forever)."""


@contextlib.contextmanager
def sweep_lock(sweep_dir: str | Path, *, shared: bool = False) -> Iterator[None]:
    """Hold the sweep directory's lock: exclusive for a writer (the lock file created),
    shared for a reader (nothing held when there is no lock file: nobody writes with one,
    or when this process holds it already)."""
    key = os.path.abspath(sweep_dir)
    path = Path(key) / LOCK_FILE
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    try:
        fd = os.open(path, (os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT) | os.O_NONBLOCK, 0o644)
    except OSError:
        if not shared:
            raise
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        _HELD[key] = 1
        yield
    finally:
        _HELD.pop(key, None)
        os.close(fd)


def _read(path: Path, limit: int | None) -> tuple[Verified | None, str | None]:
    doc, _ = _expected(path)
    found = read_bounded(path, limit)
    if doc is None:
        return Verified(found.data, False), None
    problem = verify_bytes(path, found.data, doc)
    return (Verified(found.data, True), None) if problem is None else (None, problem)


def read_verified(path: str | Path, limit: int | None = None) -> Verified:
    """The bytes of the sweep-level file ``path``, checked against its manifest when it has
    one. FileNotFoundError when there is no file, ``Unreadable`` when it is no regular file
    within ``limit`` (``bounded_read.limit_for``), ``SweepManifestError`` on a mismatch."""
    path = Path(path)
    found, problem = _read(path, limit)
    if found is None:  # a writer between its file and its manifest? wait for it, look again
        with sweep_lock(path.parent, shared=True):
            found, problem = _read(path, limit)
    if found is None:
        raise SweepManifestError(path, problem or "does not match its manifest")
    return found
