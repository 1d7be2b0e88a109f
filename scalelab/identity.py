"""Run identity: a hash of the canonical JSON of a run's identity fields.

Operational fields (``config.OPERATIONAL_KEYS``: logging cadence, device, paths, name)
never enter it, so changing them never re-runs anything.

Two ids, one hash (sha256 of ``identity_json``):

* ``full_id``: the whole 64-hex digest, stored as ``run_id_full`` in a run's
  ``config.yaml``. Every identity check compares it: the plan's duplicate detection, the
  run-directory check of ``scalelab train``, shared runs across blocks.
* ``run_id``: its first ``ID_HEX`` = 32 hex digits (128 bits), THE run id used
  everywhere else: plan.parquet's ``run_id``, the run directory ``<name>-<run id>``, the
  ``run_id`` column of the records, log lines. By the birthday bound, n runs collide
  with probability about n^2 / 2^129: 1.5e-25 for a 1e7-run plan. (An 8-hex id, 32
  bits, collides by chance from about 65,000 runs: 2^16.) A prefix shared by two
  different full ids is still refused as a collision, naming both runs, never taken
  for one run.

Run directories written before the run id had 32 hex digits are named
``<name>-<8 hex>``. They are not adopted: the new plan names ``<name>-<32 hex>``, so a
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
import re
from typing import Any

from scalelab import strict
from scalelab.config import OPERATIONAL_KEYS, RunConfig

ID_HEX = 32  # hex digits of the run id: 128 bits

# Sections left out of the identity while every field is at its default, so that adding
# them did not change the ids of runs that do not use them (no relaunch of old sweeps).
DEFAULT_OMITTED_SECTIONS = ("distill",)
# Fields added later, left out while at their default, for the same reason (a run of an
# old sweep keeps its id; a non-default value makes a new one).
DEFAULT_OMITTED_KEYS = (
    "data.subset_seed", "train.divergence_factor", "train.divergence_patience",
    "optim.stochastic_rounding",
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


def run_dir_name(cfg: RunConfig, rid: str | None = None) -> str:
    """``<readable-name>-<run id>``; the name is sanitised for file systems. ``rid``: the
    run id when the caller already has it (else it is computed)."""
    name = re.sub(r"[^A-Za-z0-9_.=+-]+", "_", cfg.name).strip("_")[:80] or "run"
    return f"{name}-{rid or run_id(cfg)}"


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
