"""Dotted config keys (``optim.lr``, ``model.preset``, ``extra.recipe``) of a RunConfig.

The sweep spec names every varying or derived value by its dotted key. This module
knows which keys exist (with did-you-mean), their annotations and declared ranges
(``strict.bounded``), whether they are numeric, and how to produce a new frozen
RunConfig with some keys replaced — fast (``dataclasses.replace`` per touched section),
because the planner does it per run.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, get_args, get_origin, get_type_hints

from scalelab import strict
from scalelab.config import RunConfig
from scalelab.errors import UserError, did_you_mean

__all__ = ["coerce_value", "get_value", "is_numeric", "key_range", "key_type", "leaf_keys",
           "with_values"]

_FREE_DICTS = ("extra",)
"""Sections whose sub-keys are free-form (``extra.<anything>``)."""


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def leaf_keys() -> tuple[str, ...]:
    """Every dotted leaf key of RunConfig, e.g. ('name', 'model.preset', ...)."""
    return strict.dotted_keys(RunConfig)


@functools.cache
def key_type(key: str) -> Any:
    """Annotation of dotted ``key``; an unknown key is a UserError with did-you-mean."""
    parts = key.split(".")
    if len(parts) >= 2 and parts[0] in _FREE_DICTS and all(parts[1:]):
        return Any
    cls: Any = RunConfig
    for i, part in enumerate(parts):
        hints = _hints(cls) if dataclasses.is_dataclass(cls) else {}
        if part not in hints:
            raise UserError(f"unknown config key '{key}'{did_you_mean(key, leaf_keys())}")
        cls = hints[part]
        if dataclasses.is_dataclass(cls) and i == len(parts) - 1:
            raise UserError(
                f"'{key}' is a section; name one of its fields (e.g. '{key}."
                f"{dataclasses.fields(cls)[0].name}')"
            )
    return cls


@functools.cache
def key_range(key: str) -> strict.Range | None:
    """The declared range of dotted ``key`` (None: none declared, or a free-form key)."""
    key_type(key)  # an unknown key is an error here too
    owner, _, leaf = key.rpartition(".")
    cls: Any = RunConfig
    for part in filter(None, owner.split(".")):
        cls = _hints(cls).get(part) if dataclasses.is_dataclass(cls) else None
    return strict.field_range(cls, leaf) if dataclasses.is_dataclass(cls) else None


def is_numeric(key: str) -> bool:
    """Whether ``key`` holds an int or float (possibly Optional)."""
    return is_numeric_type(key_type(key))


def is_int(key: str) -> bool:
    return is_int_type(key_type(key))


def is_numeric_type(tp: Any) -> bool:
    """Whether annotation ``tp`` is int or float (possibly Optional)."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return len(args) == 1 and args[0] in (int, float)
    return tp in (int, float)


def is_int_type(tp: Any) -> bool:
    """Whether annotation ``tp`` is int (possibly Optional): derived values get rounded."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        return int in get_args(tp) and float not in get_args(tp)
    return tp is int


def coerce_value(key: str, value: Any, *, path: str) -> Any:
    """Check/convert one value for ``key`` (ints -> floats, lists -> tuples), and check it
    against the key's declared range."""
    value = strict.coerce(key_type(key), value, file=None, path=path)
    return strict.check_range(key_range(key), value, file=None, path=path)


def get_value(cfg: RunConfig, key: str) -> Any:
    """The value at dotted ``key`` (``extra.x`` -> ``cfg.extra.get('x')``)."""
    node: Any = cfg
    parts = key.split(".")
    if parts[0] in _FREE_DICTS:
        node = getattr(cfg, parts[0])
        for part in parts[1:]:
            node = node.get(part) if isinstance(node, dict) else None
        return node
    for part in parts:
        node = getattr(node, part)
    return node


def with_values(
    cfg: RunConfig, values: Mapping[str, Any], cache: dict | None = None
) -> RunConfig:
    """A copy of ``cfg`` with dotted keys replaced (values already coerced). ``cache``
    (any dict kept across calls) reuses equal section objects: plans repeat them. A value
    outside its key's declared range is a UserError naming the key."""
    if not values:
        return cfg
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        head, _, rest = key.partition(".")
        if not rest:
            top[head] = _in_range(key, value)
        else:
            sections.setdefault(head, {})[rest] = value
    try:
        for head, fields in sections.items():
            current = getattr(cfg, head)
            if head in _FREE_DICTS:
                merged = copy.deepcopy(top.get(head, current))
                for sub, value in fields.items():
                    strict.set_dotted(merged, sub, value)
                top[head] = merged
            elif cache is None:
                top[head] = _section(head, current, fields)
            else:
                key = (head, id(current), tuple((k, type(v), v) for k, v in fields.items()))
                try:
                    hit = cache.get(key)
                except TypeError:  # an unhashable value: no caching
                    key = hit = None
                if hit is None:
                    hit = (current, _section(head, current, fields))  # pins current
                    if key is not None:
                        cache[key] = hit
                top[head] = hit[1]
        return _replace(cfg, top)
    except (ValueError, TypeError) as err:  # a section's __post_init__ validation
        raise UserError(str(err), key=", ".join(values)) from None


def _section(head: str, current: Any, fields: dict[str, Any]) -> Any:
    """Section ``head`` with ``fields`` replaced, each checked against its declared range."""
    for name, value in fields.items():
        _in_range(f"{head}.{name}", value)
    return dataclasses.replace(current, **fields)


def _in_range(key: str, value: Any) -> Any:
    """``value`` unchanged when in range; else a UserError whose message names ``key``
    (the planner reports it under the run's name and the spec key that set it)."""
    try:
        return strict.check_range(key_range(key), value, file=None, path=key)
    except UserError as err:
        raise UserError(str(err)) from None


def _replace(obj: Any, changes: dict[str, Any]) -> Any:
    """``dataclasses.replace`` for init fields; a shallow copy when the class has no
    ``__post_init__`` to run (RunConfig: the planner does this per run)."""
    if hasattr(type(obj), "__post_init__"):
        return dataclasses.replace(obj, **changes)
    new = copy.copy(obj)
    for name, value in changes.items():
        object.__setattr__(new, name, value)
    return new
