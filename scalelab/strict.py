"""Strict construction of frozen dataclasses from plain dicts (YAML, CLI overrides).

Unknown keys are errors with a did-you-mean; values are checked against the field's
annotation (int, float, str, bool, Literal, Optional, tuple[...], dict, nested dataclass).
Floats must be finite: no field takes nan or inf (where "no limit" is meant, the field is
Optional and None says so, e.g. ``train.grad_clip``, ``train.loss_ceiling``), and the run
identity cannot hash them. ``Any`` values (free-form tags such as ``extra``) must be plain
data for the same reason: null, bool, int, finite float, str, lists and string-keyed
mappings of those. Every error names the file and the dotted key path.

Numeric fields declare the values they accept where they are declared:
``lr: float = strict.bounded(3e-3, ge=0)`` is a field with default 3e-3 whose values must
be >= 0 (items of a tuple field each; None passes an Optional field); an integer must
also fit in 64 bits. ``build`` and
``check_range`` (the planner's values) enforce them, so what a run would refuse is refused
where the value is written.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from scalelab import yamlsafe
from scalelab.errors import UserError, did_you_mean

T = TypeVar("T")

INT64 = 2**63
"""Integers of a ranged field lie in [-2^63, 2^63): what torch and numpy compute with."""
RANGE = "scalelab.range"
"""The field-metadata key of a field's ``Range``."""


@dataclasses.dataclass(frozen=True)
class Range:
    """The interval a numeric field's values lie in; a missing end is unbounded."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    """``low`` itself is excluded (> low rather than >= low)."""
    high_open: bool = False
    """``high`` itself is excluded (< high rather than <= high)."""
    note: str = ""
    """What the declaration adds to the range in words, e.g. 'null = no clipping'."""

    def __contains__(self, value: Any) -> bool:
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            text = f"{'>' if self.low_open else '>='} {shown(self.low)}"
        elif self.low is None:
            text = f"{'<' if self.high_open else '<='} {shown(self.high)}"
        else:
            text = (f"in {'(' if self.low_open else '['}{shown(self.low)}, "
                    f"{shown(self.high)}{')' if self.high_open else ']'}")
        return f"{text} ({self.note})" if self.note else text


def bounded(default: Any, *, gt: float | None = None, ge: float | None = None,
            lt: float | None = None, le: float | None = None, note: str = "") -> Any:
    """A dataclass field with ``default`` whose values must be > gt / >= ge and < lt / <= le
    (give at most one of each pair); ``note`` says in words what the range leaves out."""
    if (gt is not None and ge is not None) or (lt is not None and le is not None):
        raise TypeError("bounded: give one of gt/ge and one of lt/le")
    low, high = (gt if ge is None else ge), (lt if le is None else le)
    rng = Range(low, high, low_open=gt is not None, high_open=lt is not None, note=note)
    if default is not None and not all(v in rng for v in _items(default)):
        raise TypeError(f"bounded: the default {default!r} is not {rng}")
    return dataclasses.field(default=default, metadata={RANGE: rng})


def field_range(cls: type, name: str) -> Range | None:
    """The declared ``Range`` of field ``name`` of dataclass ``cls`` (None: none declared)."""
    return _ranges(cls).get(name)


def check_range(rng: Range | None, value: Any, *, file: str | None, path: str) -> Any:
    """``value`` unchanged when it (each item of a tuple; None always) lies in ``rng``."""
    if rng is None or value is None:
        return value
    for i, item in enumerate(_items(value)):
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            continue
        wide = isinstance(item, int) and not -INT64 <= item < INT64
        if wide or item not in rng:
            where = f"{path}[{i}]" if isinstance(value, tuple) else path
            raise UserError(f"{shown(item)} is out of range: expected {rng}"
                            f"{' and within 64 bits' if wide else ''}", file=file, key=where)
    return value


@functools.cache
def _ranges(cls: type) -> dict[str, Range]:
    return {f.name: f.metadata[RANGE] for f in dataclasses.fields(cls) if RANGE in f.metadata}


def _items(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def shown(x: Any) -> str:
    """A number for a message: 2^k for a power of two past 2^20, an integer of more than
    40 digits by its digit count, else repr."""
    if isinstance(x, bool) or not isinstance(x, int):
        return repr(x)
    if x > 2**20 and x & (x - 1) == 0:
        return f"2^{x.bit_length() - 1}"
    digits = len(str(abs(x))) if x.bit_length() < 14_000 else None  # str() stops at 4300 digits
    if digits is None or digits > 40:
        return f"a {'negative ' if x < 0 else ''}{digits or 'many'}-digit integer"
    return repr(x)


def build(cls: type[T], data: Any, *, file: str | None = None, path: str = "") -> T:
    """Build dataclass ``cls`` from ``data`` (a mapping), strictly."""
    if not isinstance(data, dict):
        raise UserError(f"expected a mapping, got {_kind(data)}", file=file, key=path or None)
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in data.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in fields:
            raise UserError(f"unknown key{did_you_mean(key, fields)}", file=file, key=key_path)
        value = coerce(hints[key], value, file=file, path=key_path)
        kwargs[key] = check_range(field_range(cls, key), value, file=file, path=key_path)
    missing = [
        n
        for n, f in fields.items()
        if n not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        key_path = f"{path}.{missing[0]}" if path else missing[0]
        raise UserError("required key is missing", file=file, key=key_path)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:  # __post_init__ validation
        raise UserError(str(err), file=file, key=path or None) from None
    except UserError as err:  # a __post_init__ check naming its key, relative to ``cls``
        if err.file is not None:
            raise
        key = ".".join(p for p in (path, err.key) if p) or None
        raise UserError(err.detail, file=file, key=key) from None


def coerce(tp: Any, value: Any, *, file: str | None, path: str) -> Any:
    """Check ``value`` against annotation ``tp``; convert lists to tuples and ints to floats."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return _plain(value, file=file, path=path)
    if dataclasses.is_dataclass(tp):
        return build(tp, value, file=file, path=path)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(arg, value, file=file, path=path)
            except UserError as err:
                errors.append(err)
        raise errors[-1] if len(errors) == 1 else UserError(
            f"expected {_name(tp)}, got {_kind(value)} {value!r}", file=file, key=path
        )
    if origin is Literal:
        if value in args:
            return value
        raise UserError(
            f"{value!r} is not one of {', '.join(map(repr, args))}"
            f"{did_you_mean(value, map(str, args))}",
            file=file,
            key=path,
        )
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise UserError(f"expected a list, got {_kind(value)}", file=file, key=path)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(
                coerce(args[0], v, file=file, path=f"{path}[{i}]") for i, v in enumerate(value)
            )
        if len(args) != len(value):
            raise UserError(f"expected {len(args)} items, got {len(value)}", file=file, key=path)
        return tuple(
            coerce(a, v, file=file, path=f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value))
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"expected a mapping, got {_kind(value)}", file=file, key=path)
        kt, vt = args or (Any, Any)
        return {
            coerce(kt, k, file=file, path=path): coerce(vt, v, file=file, path=f"{path}.{k}")
            for k, v in value.items()
        }
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            return int(value)  # YAML writes 2e8 as a float
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _finite(float(value), file=file, path=path)
        if isinstance(value, str):  # PyYAML reads "1e-3" (no dot) as a string
            try:
                number = float(value)
            except ValueError:
                pass
            else:
                return _finite(number, file=file, path=path)
    elif tp is str:
        if isinstance(value, str):
            return value
    else:
        return value
    raise UserError(f"expected {_name(tp)}, got {_kind(value)} {value!r}", file=file, key=path)


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file through ``scalelab.yamlsafe``: a missing, unreadable or non-UTF-8
    file, a syntax error, a duplicate key or an alias bomb is a one-line UserError."""
    return yamlsafe.load(yamlsafe.read_text(path), file=str(path))


def override_source(item: str) -> str:
    """How errors name a command-line override: ``override 'optim.lr=1'``."""
    return f"override {item!r}"


def parse_override(item: str) -> tuple[str, Any]:
    """``'train.lr=3e-3'`` -> ``('train.lr', 0.003)``; the value is parsed as YAML (text
    that is not YAML stays a string). The key must be dotted names: no empty key or empty
    segment (``=3``, ``a..b``, ``.a``, ``a.``), no whitespace inside a segment."""
    source = override_source(item)
    if "=" not in item:
        raise UserError("missing '=' (expected dotted.key=value)", file=source)
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key:
        raise UserError("empty key (expected dotted.key=value)", file=source)
    for part in key.split("."):
        if not part:
            raise UserError(f"empty segment in key {key!r} (expected dotted.key=value)", file=source)
        if part != "".join(part.split()):
            raise UserError(f"whitespace in key {key!r} (expected dotted.key=value)", file=source)
    try:
        value = yamlsafe.load(raw, file=source) if raw else None
    except yamlsafe.YamlSyntaxError:
        value = raw
    return key, value


def set_dotted(tree: dict, key: str, value: Any, *, file: str | None = None) -> None:
    """Set ``tree['a']['b'] = value`` for ``key='a.b'``, creating mappings on the way."""
    parts = key.split(".")
    node = tree
    for i, part in enumerate(parts[:-1]):
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            where = ".".join(parts[: i + 1])
            raise UserError(f"cannot set {key}: {where} is not a mapping", file=file, key=where)
        node = nxt
    node[parts[-1]] = value


@functools.cache
def dotted_keys(cls: type) -> tuple[str, ...]:
    """Every dotted leaf key of dataclass ``cls``, e.g. ('name', 'model.preset', ...)."""
    hints = get_type_hints(cls)
    out: list[str] = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out += [f"{f.name}.{sub}" for sub in dotted_keys(tp)]
        else:
            out.append(f.name)
    return tuple(out)


def check_key(cls: type, key: str, *, file: str | None = None) -> None:
    """Refuse a dotted ``key`` naming no field of dataclass ``cls``, suggesting the closest
    full dotted key (``optim.lrr`` -> 'optim.lr'; a bare field name such as ``lr`` -> the
    key ending in it). Below a non-dataclass field (``extra.*``) anything goes."""
    tp: Any = cls
    for part in key.split("."):
        if not dataclasses.is_dataclass(tp):
            return
        names = {f.name for f in dataclasses.fields(tp) if f.init}
        if part not in names:
            choices = dotted_keys(cls)
            hint = did_you_mean(key, choices)
            if not hint:
                leaf = key.rsplit(".", 1)[-1]
                same = [c for c in choices if c.rsplit(".", 1)[-1] == leaf]
                hint = f" (did you mean '{same[0]}'?)" if same else ""
            raise UserError(f"unknown key{hint}", file=file, key=key)
        tp = get_type_hints(tp)[part]


def to_dict(obj: Any) -> Any:
    """Dataclass -> plain dict with lists (YAML/JSON friendly)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def _finite(number: float, *, file: str | None, path: str) -> float:
    if not math.isfinite(number):
        raise UserError(f"expected a finite number, got {number!r}", file=file, key=path)
    return number


def _plain(value: Any, *, file: str | None, path: str) -> Any:
    """``value`` unchanged when it is plain data the run identity can hash (module doc)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _finite(value, file=file, path=path)
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _plain(item, file=file, path=f"{path}[{i}]")
        return value
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise UserError(f"expected string keys, got {_kind(k)} {k!r}", file=file, key=path)
            _plain(item, file=file, path=f"{path}.{k}" if path else k)
        return value
    raise UserError(
        f"expected plain data (null, bool, number, string, list, mapping), got {_kind(value)} "
        f"{value!r}", file=file, key=path)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
