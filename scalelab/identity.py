"""Run identity: a short hash of the canonical JSON of a run's identity fields.

Operational fields (``config.OPERATIONAL_KEYS``: logging cadence, device, paths, name)
never enter it, so changing them never re-runs anything.
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

HASH_LEN = 8

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


def run_id(cfg: RunConfig) -> str:
    """The full sha256 hex digest of the identity; directories use the first 8 chars."""
    return hashlib.sha256(identity_json(cfg).encode()).hexdigest()


def short_id(cfg: RunConfig) -> str:
    return run_id(cfg)[:HASH_LEN]


def run_dir_name(cfg: RunConfig) -> str:
    """``<readable-name>-<hash8>``; the name is sanitised for file systems."""
    name = re.sub(r"[^A-Za-z0-9_.=+-]+", "_", cfg.name).strip("_")[:80] or "run"
    return f"{name}-{short_id(cfg)}"


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
