"""A finished run's records prove their integrity: ``<run>/manifest.json``.

When a run ends COMPLETED or DIVERGED, after its records are compacted, it writes (last
of its record files, atomically) the size and sha256 of every file the fits read:
``config.yaml`` (the run's config, ``run_id`` and ``run_id_full``), ``metrics.parquet``,
``evals.parquet`` and ``norms.parquet``, with its run id and final step, in the format of
the checkpoint manifests (``train.checkpoint.manifest``: one hashing engine). Its status.json then
says ``records_manifest: manifest.json``.

``verify_run`` is what ``collect`` asks of each run directory:

- the run id: ``config.yaml`` must hold the plan row's run id (as ``run_id`` or
  ``run_id_full``), and so must the manifest: a directory copied or symlinked over
  another run's is caught here, whatever the length of the ids;
- for a run that ended COMPLETED or DIVERGED: every file as the manifest lists it (a
  missing file, another size, another sha256: one flipped bit), and a manifest at all when
  its status.json says it wrote one.

A run finished before record manifests existed has neither: its records are kept as they
are and counted as unverified (``verified`` None), so old sweeps still collect and fit.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalelab import strict
from scalelab.errors import UserError
from scalelab.store.atomic import write_json_atomic
from scalelab.store.layout import CONFIG_FILE, EVALS_FILE, METRICS_FILE, NORMS_FILE
from scalelab.train.checkpoint.manifest import MANIFEST_FILE, Problem, file_digest, manifest_doc, read_manifest, verify

__all__ = ["MARK", "RECORD_FILES", "Verdict", "config_ids", "id_problem", "verify_run",
           "write_records_manifest"]

RECORD_FILES = (CONFIG_FILE, METRICS_FILE, EVALS_FILE, NORMS_FILE)
"""The files a run's manifest lists (those present when it finishes)."""
MARK = "records_manifest"
"""status.json's key naming the manifest a finished run wrote."""
_FINISHED = ("COMPLETED", "DIVERGED")


def write_records_manifest(run_dir: str | Path, step: int, run_id: str) -> dict[str, str]:
    """Hash the record files of ``run_dir`` into its manifest.json (atomically); the field
    to merge into status.json."""
    run_dir = Path(run_dir)
    files = {n: file_digest(run_dir / n) for n in RECORD_FILES if (run_dir / n).is_file()}
    write_json_atomic(run_dir / MANIFEST_FILE, manifest_doc(step, files, run_id=run_id))
    return {MARK: MANIFEST_FILE}


@dataclass(frozen=True)
class Verdict:
    """What ``verify_run`` found: ``verified`` True (manifest and ids match), False (a
    mismatch: ``problem`` says which file and what), None (nothing to verify against: not
    finished, or finished before record manifests). ``ids``: the run ids ``config.yaml``
    holds (empty without one), which the records' ``run_id`` column must be among."""

    verified: bool | None
    problem: str | None = None
    ids: frozenset[str] = frozenset()
    sha256: tuple[tuple[str, str], ...] = ()
    """(file name, sha256) of each file the manifest vouched for (a verified run): a reader
    that opens one again checks the bytes it got against this."""


def config_ids(run_dir: str | Path) -> frozenset[str] | str:
    """The run ids ``<run>/config.yaml`` holds (``run_id``, ``run_id_full``; empty when
    there is no config.yaml), or what is wrong with it."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return frozenset()
    try:
        doc = strict.load_yaml(path)
    except UserError as err:
        return f"config.yaml unreadable ({err.detail})"
    ids = frozenset(v for k in ("run_id", "run_id_full")
                    if isinstance(doc, dict) and isinstance(v := doc.get(k), str) and v)
    return ids or "config.yaml holds no run_id"


def id_problem(want: str, ids: frozenset[str], found: Iterable[Any], where: str) -> str | None:
    """Why the ids ``found`` in ``where`` are not the run ``want`` (whose config holds
    ``ids``; compared whole, never cut to a length), or None."""
    accepted = ids | {want}
    wrong = sorted({str(v) for v in found} - accepted)
    if wrong:
        return f"{where} holds run {', '.join(wrong)}, not {want} (another run's records)"
    return None


def verify_run(run_dir: str | Path, run_id: str, status: dict[str, Any] | None) -> Verdict:
    """The verdict on the run directory ``run_dir``, planned as ``run_id``, whose
    status.json is ``status``."""
    run_dir = Path(run_dir)
    ids = config_ids(run_dir)
    if isinstance(ids, str):
        return Verdict(False, ids)
    if ids and run_id not in ids:
        held = min(ids, key=len)  # its run_id (run_id_full is the longer)
        return Verdict(False, f"config.yaml holds run {held}, not {run_id} (another run's "
                              "directory)", ids)
    if (status or {}).get("state") not in _FINISHED:
        return Verdict(None, None, ids)
    has = os.path.lexists(run_dir / MANIFEST_FILE)
    if not has:
        if (status or {}).get(MARK):
            return Verdict(False, f"no {MANIFEST_FILE} (status.json says the run wrote one)", ids)
        return Verdict(None, None, ids)
    doc = read_manifest(run_dir)
    if isinstance(doc, Problem):
        return Verdict(False, str(doc), ids)
    if not isinstance(doc, dict) or not isinstance(doc.get("run_id"), str):
        return Verdict(False, f"{MANIFEST_FILE} names no run", ids)
    if bad := id_problem(run_id, ids, [doc["run_id"]], MANIFEST_FILE):
        return Verdict(False, bad, ids)
    if bad := verify(run_dir, _steps(status, doc), doc):
        return Verdict(False, bad, ids)
    files = doc.get("files") or {}
    return Verdict(True, None, ids, tuple(sorted((n, e["sha256"]) for n, e in files.items())))


def _steps(status: dict[str, Any] | None, doc: dict[str, Any]) -> Any:
    """The step the manifest must be for: status.json's ``steps_done`` (the manifest's own
    when status.json has none)."""
    steps = (status or {}).get("steps_done")
    return steps if type(steps) is int else doc.get("step")
