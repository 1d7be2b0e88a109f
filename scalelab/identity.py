"""Run identity: a hash of the canonical JSON of a run's identity fields.

Operational fields (``config.OPERATIONAL_KEYS``: logging cadence, device, paths, name)
never enter it, so changing them never re-runs anything.

Two ids, one hash (sha256 of ``identity_json``):

* ``full_id``: the whole 64-hex digest, stored as ``run_id_full`` in a run's
  ``config.yaml``. Every identity check compares it: the plan's duplicate detection, the
  run-directory check of ``scalelab train``, shared runs across blocks.
* ``run_id``: its first ``ID_HEX`` = 32 hex digits (128 bits), THE run id used
  everywhere else: plan.parquet's ``run_id``, the run directory ``<label>-<run id>``, the
  ``run_id`` column of the records, log lines. By the birthday bound, n runs collide
  with probability about n^2 / 2^129: 1.5e-25 for a 1e7-run plan. (An 8-hex id, 32
  bits, collides by chance from about 65,000 runs: 2^16.) A prefix shared by two
  different full ids is still refused as a collision, naming both runs, never taken
  for one run.

A run directory is ``runs/<label>-<run id>`` (``run_dir_name``): the label is read from
identity fields only (``run_dir_label``: the model and the optimizer), so the name is the
identity's. Edits that leave the identity unchanged (renaming a block, moving a constant
key between ``base`` and a one-value axis, reordering axes, adding seeds) name the same
directory, and the relaunch launches only the runs that are new.

Directories named another way for the same identity (by scalelab before the name was the
identity's: ``<run name>-<32 hex>``) are adopted (``adopted_dirs``): where the canonical
directory does not exist, a directory of ``runs/`` named ``<anything>-<run id>`` whose
``config.yaml`` holds the run's full id as ``run_id_full`` (before the run started, whose
``config-input.yaml`` has that identity) is the run's directory. A symbolic link, or a
directory that holds another full id or none, is never adopted. ``launch`` resolves a
plan's directories once, at the plan-vs-disk diff, and writes them to plan.parquet, which
``status``, ``collect`` and ``retry`` read; a distillation teacher, named by its canonical
directory, resolves through that record (``scalelab.distill.resolve.teacher_dir``).

Run directories written before the run id had 32 hex digits are named
``<name>-<8 hex>``. They are not adopted: the new plan names ``<label>-<32 hex>``, so a
relaunch trains those runs again in new directories, and the old ones stay on disk
untouched (their ``config.yaml`` still holds ``run_id_full`` for ``scalelab explain``).
An 8-hex directory name cannot be trusted to name one config, which is the failure a
longer id removes; a sweep directory that should not retrain is finished and collected
with the scalelab that planned it, or the new plan goes into a fresh sweep directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scalelab import strict
from scalelab.config import OPERATIONAL_KEYS, RunConfig, load_run_config
from scalelab.errors import UserError
from scalelab.store.layout import CONFIG_FILE, CONFIG_INPUT_FILE
from scalelab.store.status import State, read_status

ID_HEX = 32  # hex digits of the run id: 128 bits

# Sections left out of the identity while every field is at its default, so that adding
# them did not change the ids of runs that do not use them (no relaunch of old sweeps).
DEFAULT_OMITTED_SECTIONS = ("distill",)
# Fields added later, left out while at their default, for the same reason (a run of an
# old sweep keeps its id; a non-default value makes a new one).
DEFAULT_OMITTED_KEYS = (
    "data.subset_seed", "train.divergence_factor", "train.divergence_patience",
    "optim.stochastic_rounding", "model.objective",
)


def identity_dict(cfg: RunConfig) -> dict[str, Any]:
    """The nested dict of identity fields (operational keys removed)."""
    tree = {}
    for name in _TOP_FIELDS:
        sub = _field_tree(name, getattr(cfg, name))
        if sub is not _OMITTED:
            tree[name] = sub
    return tree


def identity_json(cfg: RunConfig) -> str:
    """``canonical_json(identity_dict(cfg))``, byte for byte, assembled per top-level
    field with each field's JSON cached (``_field_json``): a 10,000-run plan shares a few
    dozen distinct section objects, and serialising every run's whole tree dominated
    planning time (bench/plan_scale.py)."""
    parts = (_field_json(name, getattr(cfg, name)) for name in _TOP_FIELDS)
    return "{" + ",".join(p for p in parts if p) + "}"


_TOP_FIELDS = tuple(
    sorted(f.name for f in dataclasses.fields(RunConfig) if f.name not in OPERATIONAL_KEYS)
)
_OMITTED = object()
_SCALARS = (int, float, bool, str, type(None))
_JSON_CACHE: dict[tuple, str] = {}
_PINNED: list[Any] = []
_KEY_DEFAULTS = {
    key: strict.to_dict(getattr(RunConfig(), key.partition(".")[0]))[key.partition(".")[2]]
    for key in DEFAULT_OMITTED_KEYS
}


def _same(value: Any, default: Any) -> bool:
    """Equal and of the same type (so 1 is not the default True, nor 1.0 the default 1)."""
    return type(value) is type(default) and value == default


def _field_tree(name: str, value: Any) -> Any:
    """One top-level field as a plain tree, its operational keys removed."""
    tree = strict.to_dict(value)
    for key in OPERATIONAL_KEYS:
        head, _, rest = key.partition(".")
        if head == name and rest:
            *parents, leaf = rest.split(".")
            node = tree
            for part in parents:
                node = node[part]
            node.pop(leaf, None)
    for key in DEFAULT_OMITTED_KEYS:
        head, _, leaf = key.partition(".")
        if head == name and isinstance(tree, dict) and leaf in tree and \
                _same(tree[leaf], _KEY_DEFAULTS[key]):
            tree.pop(leaf)
    # Sections added later are left out at their defaults, keeping old ids unchanged.
    if name in DEFAULT_OMITTED_SECTIONS and tree == strict.to_dict(getattr(RunConfig(), name)):
        return _OMITTED
    return tree


def _field_json(name: str, value: Any) -> str:
    """``"name":<canonical JSON>`` of one top-level field ('' when omitted). Cached:
    hashable frozen sections by object identity (a plan reuses the same objects; the
    object is pinned so its id is not reused), scalars and unhashable sections by repr
    (which tells 1 from 1.0 and True), free dicts not at all."""
    is_section = dataclasses.is_dataclass(value)
    key = (name, id(value)) if is_section else None
    hit = _JSON_CACHE.get(key) if key else None
    if hit is not None:
        return hit
    if is_section:
        try:
            hash(value)
        except TypeError:
            key = (name, repr(value))
            hit = _JSON_CACHE.get(key)
    elif type(value) in _SCALARS or (type(value) is dict and not value):
        key = (name, repr(value))
        hit = _JSON_CACHE.get(key)
    if hit is None:
        tree = _field_tree(name, value)
        hit = "" if tree is _OMITTED else f"{json.dumps(name)}:{_canonical(tree, name)}"
        if key and len(_JSON_CACHE) < 1 << 16:
            _JSON_CACHE[key] = hit
            _PINNED.append(value)
    return hit


def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, floats by repr; refuses the rest."""
    return _canonical(obj, "")


def _canonical(obj: Any, path: str) -> str:
    return json.dumps(_check(obj, path), sort_keys=True, separators=(",", ":"), allow_nan=False)


def full_id(cfg: RunConfig) -> str:
    """The full sha256 hex digest of the identity (``run_id_full``): what identity
    checks compare."""
    return hashlib.sha256(identity_json(cfg).encode()).hexdigest()


def run_id(cfg: RunConfig) -> str:
    """The run id: the first ``ID_HEX`` hex digits of ``full_id``."""
    return id_of(full_id(cfg))


def id_of(full: str) -> str:
    """The run id of a full id."""
    return full[:ID_HEX]


def run_dir_label(cfg: RunConfig) -> str:
    """The readable part of a run directory's name, read from identity fields only: the
    model preset, the width and depth where set explicitly, and the optimizer (e.g.
    ``150M_muon``, ``d512_l8_adamw``), sanitised for file systems. Never the run's name
    (block and axis labels), which is operational: two plans of one identity name one
    directory."""
    m = cfg.model
    parts = [m.preset] if m.preset else []
    parts += [f"{tag}{v}" for tag, v in (("d", m.d_model), ("l", m.n_layers)) if v is not None]
    parts.append(cfg.optim.name)
    label = re.sub(r"[^A-Za-z0-9_.=+-]+", "_", "_".join(map(str, parts)))
    return label.strip("_.-")[:40].strip("_.-") or "run"


def run_dir_name(cfg: RunConfig, rid: str | None = None) -> str:
    """``<label>-<run id>`` (``run_dir_label``): a function of the identity alone. ``rid``:
    the run id when the caller already has it (else it is computed)."""
    return f"{run_dir_label(cfg)}-{rid or run_id(cfg)}"


_ID_SUFFIX = re.compile(rf"-([0-9a-f]{{{ID_HEX}}})$")
_FINISHED_FIRST = {State.COMPLETED.value: 0, State.DIVERGED.value: 1}


def held_full_id(run_dir: str | Path) -> str | None:
    """The full id that run directory ``run_dir`` holds: its ``config.yaml``'s
    ``run_id_full``; without a ``config.yaml`` (launched, not started), the full id of its
    ``config-input.yaml``. None when it holds neither, either is unreadable, or the
    directory or the file is a symbolic link (never followed to another run's files)."""
    run_dir = Path(run_dir)
    if run_dir.is_symlink() or not run_dir.is_dir():
        return None
    config, planned = run_dir / CONFIG_FILE, run_dir / CONFIG_INPUT_FILE
    try:
        if os.path.lexists(config):
            if config.is_symlink():
                return None
            doc = strict.load_yaml(config)
            full = doc.get("run_id_full") if isinstance(doc, dict) else None
            return full if isinstance(full, str) else None
        if os.path.lexists(planned) and not planned.is_symlink():
            return full_id(load_run_config(planned))
    except (UserError, OSError, ValueError):
        return None
    return None


def adopted_dirs(runs: str | Path, names: Sequence[str], full_of: Callable[[int], str]) -> list[str]:
    """For each run, given its canonical directory name ``names[i]`` and its full id
    ``full_of(i)`` (asked only for a run that may have been adopted), the name of its
    directory under ``runs``: the canonical one where it exists or where no other holds
    the run; else an existing ``<anything>-<run id>`` whose ``held_full_id`` is the run's
    full id (a finished one first, then by name). One listing of ``runs`` for the plan."""
    try:
        listed = os.listdir(runs)
    except OSError:  # no runs/ yet (a new sweep), or not a directory
        listed = []
    present = set(listed)
    by_id: dict[str, list[str]] = {}
    for name in listed:
        if (rid := id_in_name(name)) is not None:
            by_id.setdefault(rid, []).append(name)
    out = []
    for i, name in enumerate(names):
        rid = id_in_name(name)
        if name in present or rid not in by_id:
            out.append(name)
            continue
        full = full_of(i)
        held = [c for c in by_id[rid] if id_of(full) == rid and held_full_id(Path(runs) / c) == full]
        out.append(min(held, key=lambda c: (_finished_rank(Path(runs) / c), c)) if held else name)
    return out


def id_in_name(name: str) -> str | None:
    """The run id a run directory's name ends with (``<anything>-<32 hex>``), or None."""
    m = _ID_SUFFIX.search(name)
    return m.group(1) if m else None


def _finished_rank(run_dir: Path) -> int:
    try:
        state = (read_status(run_dir) or {}).get("state")
    except UserError:  # corrupt or unreadable: ranked with the runs that have none
        state = None
    return _FINISHED_FIRST.get(state, 2 if state else 3)


def _check(obj: Any, path: str) -> Any:
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"run identity: non-finite float at {path or '<root>'}")
        return obj
    if isinstance(obj, (list, tuple)):
        return [_check(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise ValueError(f"run identity: non-string key {k!r} at {path or '<root>'}")
            out[k] = _check(v, f"{path}.{k}" if path else k)
        return out
    raise ValueError(
        f"run identity: cannot serialise {type(obj).__name__} at {path or '<root>'} deterministically"
    )


class IdCollision(ValueError):
    """Two runs share a run id although their full ids differ."""


class RunIds:
    """The runs of one plan by run id, each with its full id and the name it came with:
    one ledger for the plan's duplicate and collision checks."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, str]] = {}

    def owner(self, full: str, name: str) -> str | None:
        """Record run ``name`` of full id ``full``. Returns the name of an earlier run with
        the same full id (the same run), else None; raises ``IdCollision`` (naming both
        runs) when an earlier run has the same run id but another full id."""
        rid = id_of(full)
        seen = self._seen.get(rid)
        if seen is None:
            self._seen[rid] = (full, name)
            return None
        if seen[0] == full:
            return seen[1]
        raise IdCollision(
            f"runs '{seen[1]}' and '{name}' share run id {rid} but not their identity "
            f"(sha256 {seen[0]} vs {full}): a run-id collision; change any identity field "
            "of one of them (e.g. its seed)"
        )
