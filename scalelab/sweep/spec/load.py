"""The sweep spec: strict YAML -> a frozen ``Spec``.

    name: tiny                        # sweep directory name
    base: {model: ..., data: ...}     # a nested RunConfig: the defaults of every run
    grid: {optim.lr: [1e-3, 3e-3]}    # product over dotted keys
    zip: [{model.preset: [a, b], optim.lr: [3e-3, 1e-3]}]   # lists that vary together
    derive: {data.unique_tokens: "20 * N"}                # computed, never typed (rules.py)
                                      # (launcher.* keys too, per run: plan/resources.py)
    members: 1                        # ensemble members 0..M-1 (RunConfig.member)
    seeds: [0, 1]                     # replicate seeds -> train.init_seed and data.seed
    launcher: {...}                   # sections.LauncherConfig (never in run ids)
    tune: {...}                       # sections.TuneConfig (scalelab tune)

Every error is a one-line ``UserError`` naming ``file:line``, the key path and, for
unknown keys, the closest valid one. Loading is pure apart from reading the file.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalelab import strict
from scalelab.config import MEMBER_LIMIT, SEED_LIMIT, RunConfig
from scalelab.errors import UserError, did_you_mean
from scalelab.sweep.spec import keys
from scalelab.sweep.spec import launcher as launcher_keys
from scalelab.sweep.spec.blocks import parse_blocks
from scalelab.sweep.spec.located import Located, load_located, parse_located
from scalelab.sweep.spec.rules import Rule, order_rules, parse_rule
from scalelab.sweep.spec.sections import LauncherConfig, TuneConfig, TuneParam

__all__ = ["LauncherConfig", "Spec", "TuneConfig", "TuneParam", "load_spec", "parse_spec"]

TOP_KEYS = ("name", "description", "base", "grid", "zip", "derive", "members", "seeds",
            "launcher", "tune", "blocks")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_SEED_KEYS = ("train.init_seed", "data.seed")
_RESERVED = {"name": "run names are built from the varying axes",
             "member": "use 'members: M'"}


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A validated sweep spec. ``expand`` (plan.py) turns it into runs."""

    name: str
    """Sweep name: the directory ``<root>/<name>/``."""
    description: str = ""
    base: RunConfig
    """Defaults of every run (the ``base:`` tree, strictly built)."""
    grid: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Dotted key -> values; the runs are the product over keys in file order."""
    zip: tuple[dict[str, tuple[Any, ...]], ...] = ()
    """Groups of keys whose value lists vary together (one axis per group)."""
    derive: dict[str, str] = field(default_factory=dict)
    """Dotted key -> rule text as written."""
    rules: tuple[Rule, ...] = ()
    """The derive rules of config keys parsed, in evaluation (dependency) order."""
    launcher_rules: tuple[Rule, ...] = ()
    """The derive rules of ``launcher.*`` keys, in evaluation order; they run after the
    config's (``scalelab.sweep.plan.resources``)."""
    members: int = 1
    """Ensemble members 0..members-1 (RunConfig.member; seeds shift by the member)."""
    seeds: tuple[int, ...] | None = None
    """Replicate seeds s: train.init_seed = data.seed = s + member. None = base seeds."""
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    tune: TuneConfig | None = None
    file: str = "<spec>"
    """Path the spec was read from (for messages)."""
    text: str = field(default="", repr=False)
    """The YAML as submitted (copied to the sweep directory as spec.yaml)."""
    lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    """Key path -> line, for errors raised later (e.g. by rules during expand)."""
    blocks: tuple[tuple[str, Spec], ...] = ()
    """``blocks:`` sub-studies as (block name, Spec); when present the plan is theirs,
    concatenated (``scalelab.sweep.spec.blocks``)."""

    def error(self, message: str, key: str | None) -> UserError:
        """A UserError located at ``key`` in this spec's file."""
        return Located(None, self.file, self.lines).error(message, key)


def load_spec(path: str | Path) -> Spec:
    """Read and validate a sweep spec file."""
    loc = load_located(path)
    return _build(loc, loc.text)


def parse_spec(text: str, *, file: str = "<spec>") -> Spec:
    """Validate a spec given as YAML text (``file`` only names it in errors)."""
    return _build(parse_located(text, file=file), text)


def _build(loc: Located, text: str) -> Spec:
    try:
        return _validate(loc, text)
    except UserError as err:
        if err.file and err.file.startswith(loc.file):
            raise
        raise loc.relocate(err) from None


def _validate(loc: Located, text: str) -> Spec:
    data = loc.data
    if not isinstance(data, dict):
        raise loc.error(f"a sweep spec is a mapping with keys {', '.join(TOP_KEYS)}", None)
    for key in data:
        if key not in TOP_KEYS:
            raise loc.error(f"unknown key{did_you_mean(key, TOP_KEYS)}", str(key))
    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise loc.error("required: a sweep name of letters, digits, '_', '.', '-'", "name")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise loc.error("expected a string", "description")
    base = strict.build(RunConfig, data.get("base") or {}, path="base")

    grid = _grid(loc, data.get("grid"))
    zips = _zips(loc, data.get("zip"), set(grid))
    varied = set(grid).union(*zips) if zips else set(grid)
    derive, rules, launcher_rules = _derive(loc, data.get("derive"), varied)
    members = _members(loc, data.get("members", 1))
    seeds = _seeds(loc, data.get("seeds"))
    _check_teachers(loc, base, grid, zips)
    touched = varied | set(derive)
    for key in touched:
        if key in _RESERVED:
            raise loc.error(f"'{key}' cannot vary here: {_RESERVED[key]}", _origin(loc, key))
        if key in _SEED_KEYS and (seeds is not None or members > 1):
            raise loc.error(f"'{key}' is set by seeds/members; vary it in one place only",
                            _origin(loc, key))
    launcher = strict.build(LauncherConfig, data.get("launcher") or {}, path="launcher")
    _check_launcher(loc, launcher)
    tune = None
    if data.get("tune") is not None:
        tune = strict.build(TuneConfig, data["tune"], path="tune")
        tune = _check_tune(loc, tune, grid, touched)
    blocks = parse_blocks(loc, data, text, _validate)
    return Spec(name=name, description=description, base=base, grid=grid, zip=tuple(zips),
                derive=derive, rules=tuple(rules), launcher_rules=tuple(launcher_rules),
                members=members, seeds=seeds,
                launcher=launcher, tune=tune, file=loc.file, text=text, lines=loc.lines,
                blocks=blocks)


def _axis_values(loc: Located, path: str, key: str, values: Any, *,
                 unique: bool = True) -> tuple[Any, ...]:
    try:
        keys.key_type(key)
    except UserError as err:
        raise loc.error(err.detail, path) from None
    if not isinstance(values, list) or not values:
        got = "an empty list" if values == [] else f"{_kind(values)} {values!r}"
        raise loc.error(f"expected a non-empty list of values, got {got}", path)
    out = tuple(keys.coerce_value(key, v, path=f"{path}[{i}]") for i, v in enumerate(values))
    for i, v in enumerate(out if unique else ()):
        if v in out[:i]:
            raise loc.error(f"value {v!r} appears twice", f"{path}[{i}]")
    return out


def _grid(loc: Located, raw: Any) -> dict[str, tuple[Any, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise loc.error(f"expected a mapping of dotted key -> list, got {_kind(raw)}",
                        "grid")
    return {str(k): _axis_values(loc, f"grid.{k}", str(k), v) for k, v in raw.items()}


def _zips(loc: Located, raw: Any, taken: set[str]) -> list[dict[str, tuple[Any, ...]]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise loc.error("expected a list of groups ({dotted key: list} mappings)", "zip")
    groups = []
    for g, group in enumerate(raw):
        path = f"zip[{g}]"
        if not isinstance(group, dict) or not group:
            raise loc.error("expected a non-empty mapping of dotted key -> list", path)
        out = {}
        for k, v in group.items():
            k = str(k)
            if k in taken:
                raise loc.error(f"'{k}' is already varied by grid or another zip group",
                                f"{path}.{k}")
            taken.add(k)
            out[k] = _axis_values(loc, f"{path}.{k}", k, v, unique=False)
        lengths = {k: len(v) for k, v in out.items()}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise loc.error(f"zipped lists must have equal lengths (got {shown})", path)
        rows = list(zip(*out.values()))
        for i, row in enumerate(rows):
            if row in rows[:i]:
                raise loc.error(f"position {i} repeats position {rows.index(row)}", path)
        groups.append(out)
    return groups


def _derive(loc: Located, raw: Any,
            varied: set[str]) -> tuple[dict[str, str], list[Rule], list[Rule]]:
    """(rule texts, config rules, launcher rules), each list in evaluation order."""
    if raw is None:
        return {}, [], []
    if not isinstance(raw, dict):
        raise loc.error("expected a mapping of dotted key -> rule string", "derive")
    numeric = [k for k in keys.leaf_keys() if keys.is_numeric(k)]
    late = (*launcher_keys.numeric_keys(), *launcher_keys.RUN_NAMES)  # launcher rules only
    parsed: dict[str, Rule] = {}
    for k, text in raw.items():
        k, path = str(k), f"derive.{k}"
        is_launcher = k.startswith(launcher_keys.PREFIX)
        try:
            if is_launcher:
                launcher_keys.check_target(k)
            else:
                keys.key_type(k)
        except UserError as err:
            raise loc.error(err.detail, path) from None
        if not is_launcher and not keys.is_numeric(k):
            raise loc.error("only numeric keys can be derived", path)
        if k in varied:
            raise loc.error(f"'{k}' is varied by grid/zip and cannot also be derived", path)
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            raise loc.error("a derived value is a rule string; put constants in base", path)
        try:
            rule = parse_rule(k, text, [*numeric, *late])
        except UserError as err:
            raise loc.error(err.detail, path) from None
        early = sorted(rule.names & set(late)) if not is_launcher else []
        if early:
            raise loc.error(f"'{early[0]}' is known once the run's config is derived: only "
                            "launcher.* rules read it", path)
        shape_dependent = k.startswith("model.") or k == "data.vocab_size"
        if shape_dependent and rule.names & {"N", "N_non_embedding"}:
            raise loc.error("a model-shape rule cannot use N (N depends on the shape)", path)
        parsed[k] = rule
    try:
        ordered = order_rules(parsed)
    except UserError as err:
        raise loc.error(err.detail, err.key) from None
    launcher = [r for r in ordered if r.target.startswith(launcher_keys.PREFIX)]
    config = [r for r in ordered if not r.target.startswith(launcher_keys.PREFIX)]
    return {k: str(v) for k, v in raw.items()}, config, launcher


def _members(loc: Located, raw: Any) -> int:
    """``members``: an integer in [1, MEMBER_LIMIT], checked before any run is expanded."""
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MEMBER_LIMIT:
        raise loc.error(f"expected an integer in [1, {MEMBER_LIMIT}] (each member is a full "
                        f"training run, planned in memory), got {strict.shown(raw)}", "members")
    return raw


def _check_teachers(loc: Located, base: RunConfig, grid: dict, zips: list[dict]) -> None:
    """Refuse an explicit ``distill.teachers`` path that must exist and does not (in base
    or a grid/zip value); names of runs under the sweep's runs/ are the launch's to check."""
    key = "distill.teachers"
    found = [("base." + key, base.distill.teachers)]
    found += [(f"grid.{key}[{i}]", v) for i, v in enumerate(grid.get(key, ()))]
    found += [(f"zip[{g}].{key}[{i}]", v) for g, group in enumerate(zips)
              for i, v in enumerate(group.get(key, ()))]
    if not any(teachers for _, teachers in found):
        return
    from scalelab.distill.resolve import missing_teacher

    for path, teachers in found:
        missing = missing_teacher(teachers)
        if missing is not None:
            raise loc.error(f"teacher run {missing} does not exist (no config.yaml there)", path)


def _seeds(loc: Located, raw: Any) -> tuple[int, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise loc.error("expected a non-empty list of integer seeds", "seeds")
    for i, s in enumerate(raw):
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < SEED_LIMIT:
            raise loc.error(f"expected an integer in [0, {strict.shown(SEED_LIMIT)}), got "
                                 f"{strict.shown(s)}", f"seeds[{i}]")
        if s in raw[:i]:
            raise loc.error(f"seed {s} appears twice", f"seeds[{i}]")
    return tuple(raw)


def _check_launcher(loc: Located, launcher: LauncherConfig) -> None:
    try:
        launcher_keys.check_launcher(launcher)
    except UserError as err:
        raise loc.error(err.detail, err.key) from None


def _check_tune(loc: Located, tune: TuneConfig, grid: dict, touched: set[str]) -> TuneConfig:
    for name in ("n_trials", "parallel", "max_evals"):
        value = getattr(tune, name)
        if value is not None and value < 1:
            raise loc.error(f"expected an integer >= 1, got {value}", f"tune.{name}")
    if tune.method == "optuna":
        if not tune.space:
            raise loc.error("method 'optuna' needs a non-empty search space", "tune.space")
        for key, param in tune.space.items():
            _check_param(loc, f"tune.space.{key}", key, param, touched)
        return tune
    if not tune.axes or len(set(tune.axes)) != len(tune.axes):
        raise loc.error("expected distinct grid keys", "tune.axes")
    for i, axis in enumerate(tune.axes):
        if axis not in grid:
            raise loc.error(f"coordinate axis '{axis}' must be a grid key"
                            f"{did_you_mean(axis, grid)}", f"tune.axes[{i}]")
        if not keys.is_numeric(axis):
            raise loc.error(f"coordinate axis '{axis}' must be numeric", f"tune.axes[{i}]")
    start = {}
    for axis, value in tune.start.items():
        if axis not in tune.axes:
            raise loc.error(f"not a coordinate axis{did_you_mean(axis, tune.axes)}",
                            f"tune.start.{axis}")
        start[axis] = keys.coerce_value(axis, value, path=f"tune.start.{axis}")
        if start[axis] not in grid[axis]:
            raise loc.error(f"start value {value!r} is not on the grid {list(grid[axis])}",
                            f"tune.start.{axis}")
    return dataclasses.replace(tune, start=start)


def _check_param(loc: Located, path: str, key: str, p: TuneParam, touched: set[str]) -> None:
    try:
        keys.key_type(key)
    except UserError as err:
        raise loc.error(err.detail, path) from None
    if key in touched or key in _RESERVED:
        raise loc.error(f"'{key}' is already set by grid/zip/derive/seeds", path)
    if p.choices is not None:
        if not p.choices or p.low is not None or p.high is not None:
            raise loc.error("give non-empty choices, or low/high, not both", path)
        for i, v in enumerate(p.choices):
            keys.coerce_value(key, v, path=f"{path}.choices[{i}]")
            if not (v is None or isinstance(v, (bool, int, float, str))):
                raise loc.error("Optuna choices must be numbers, strings, booleans or null",
                                f"{path}.choices[{i}]")
        return
    if not keys.is_numeric(key):
        raise loc.error("a range needs a numeric key; use choices", path)
    if p.low is None or p.high is None or not p.low < p.high:
        raise loc.error("expected low < high", path)
    if p.log and (p.low <= 0 or p.step is not None):
        raise loc.error("log ranges need low > 0 and no step", path)
    if p.step is not None and p.step <= 0:
        raise loc.error("expected step > 0", f"{path}.step")


def _kind(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _origin(loc: Located, key: str) -> str:
    for prefix in ("grid.", "derive."):
        if prefix + key in loc.lines:
            return prefix + key
    for path in loc.lines:
        if path.startswith("zip[") and path.endswith("]." + key):
            return path
    return key
