"""Plan expansion: ``Spec`` -> one frozen RunConfig and one table row per run (pure).

Order of the runs: the product of the grid keys (file order, first key slowest), then
each zip group as one axis, then seeds, then members (fastest). For each run:

1. grid / zip values are written over ``spec.base``;
2. seeds and members: member k with replicate seed s gets ``member = k`` and
   ``train.init_seed = data.seed = s + k`` (Kim et al. 2025: member k uses seed k, i.e.
   s = 0); without ``seeds`` the base seeds are shifted by k when members > 1;
3. derive rules run in dependency order; integer targets are rounded to the nearest
   integer (``round``, half to even);
4. ``scalelab.derive.derive`` gives N, U, D, steps and FLOPs (one call per distinct
   model/data/train triple; grids repeat them a lot);
5. launcher rules give the run's launcher (``scalelab.sweep.plan.resources``): ``launchers``;
6. ``micro_batch`` and ``gpu_gib`` (predicted peak GiB per GPU) from
   ``scalelab.sweep.plan.gpu_memory``, which refuses a run that does not fit
   ``launcher.gpu_mem_gb``.

``gpu_hours`` = flops / launcher.flops_per_gpu_s / 3600, or D_total /
launcher.throughput_tokens_per_gpu_s / 3600; null when neither is set. Two runs with
one identity are an error, and so are two that share a run id but not their full id
(``scalelab.identity.RunIds``). Facts about local datasets (vocab size, training-split size)
come in through ``datasets`` (``scalelab.sweep.plan.datasets``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import polars as pl

from scalelab.config import RunConfig
from scalelab.derive import Derived, derive
from scalelab.errors import UserError
from scalelab.identity import IdCollision, RunIds, full_id, id_of, run_dir_name
from scalelab.store.layout import RUNS_FOLDER
from scalelab.sweep.plan.datasets import DatasetFacts
from scalelab.sweep.plan.gpu_memory import MemoryColumns
from scalelab.sweep.plan.resources import LauncherRules
from scalelab.sweep.plan.rule_env import RuleEnv
from scalelab.sweep.plan.table import TABLE_COLUMNS, Plan
from scalelab.sweep.spec import keys
from scalelab.sweep.spec.load import Spec
from scalelab.sweep.spec.sections import LauncherConfig

__all__ = ["expand_grid"]

_LABELS = {"optim.lr": "lr", "optim.weight_decay": "wd", "data.epochs": "ep",
           "data.unique_tokens": "U", "train.batch_size": "bs", "data.seq_len": "T",
           "model.preset": "", "optim.name": "", "data.dataset": "", "optim.scion_radii": "rho"}


def expand_grid(spec: Spec, datasets: Mapping[tuple[str, int], DatasetFacts] | None = None) -> Plan:
    """The runs of one spec's grid/zip/seeds/members (a spec without ``blocks``; pure)."""
    builder = _Builder(spec, datasets or {})
    for values, seed in _points(spec):
        builder.add(values, seed)
    return builder.plan()


def _points(spec: Spec):
    """Yield (dotted values incl. name and member, replicate seed) per run, in plan order."""
    axes = []  # per axis: [(values dict, name label)] per position
    for keys_, rows in _axes(spec):
        axes.append([(dict(zip(keys_, row)), "_".join(filter(None, map(_label, keys_, row))))
                     for row in rows])
    seeds = spec.seeds if spec.seeds is not None else (None,)
    base = spec.base
    for *picks, seed, member in itertools.product(*axes, seeds, range(spec.members)):
        values: dict[str, Any] = {}
        parts = []
        for axis_values, label in picks:
            values.update(axis_values)
            parts.append(label)
        if seed is not None or spec.members > 1:
            s_train = base.train.init_seed if seed is None else seed
            s_data = base.data.seed if seed is None else seed
            values["train.init_seed"], values["data.seed"] = s_train + member, s_data + member
            if spec.members > 1:  # members: same unique tokens, own order and init (Kim et al.)
                values["data.subset_seed"] = s_data
            if seed is not None and len(seeds) > 1:
                parts.append(f"s{seed}")
        if spec.members > 1:
            parts.append(f"m{member}")
        values["member"] = member
        values["name"] = "_".join(filter(None, parts)) or spec.name
        yield values, seed


class _Builder:
    """Turns points into configs and table rows; caches what runs share."""

    def __init__(self, spec: Spec, datasets: Mapping[tuple[str, int], DatasetFacts]):
        self.spec, self.datasets = spec, datasets
        self.axis_keys = [k for keys_, _ in _axes(spec) for k in keys_]
        self.derived_keys = [r.target for r in spec.rules]
        self.axis_cols = self.axis_keys + self.derived_keys
        self.axis_cols += ["seed"] if spec.seeds is not None else []
        self.columns: dict[str, list] = {
            k: [] for k in ("run_id", "name", "run_dir", *self.axis_cols, *TABLE_COLUMNS)
        }
        self.configs: list[RunConfig] = []
        self.derived: list[Derived] = []
        self.ids = RunIds()
        self.derive_cache: dict[Any, Derived] = {}
        self.n_cache: dict[Any, tuple[int, int]] = {}
        self.sections: dict = {}
        self.launcher_of = LauncherRules(spec, self.n_cache)
        self.launchers: list[LauncherConfig] = []
        self.memory = MemoryColumns()
        self.sequential = any(r.target.startswith("model.") or r.target == "data.vocab_size"
                              for r in spec.rules)

    def add(self, values: dict[str, Any], seed: int | None) -> None:
        spec, name = self.spec, values["name"]
        try:
            cfg = keys.with_values(spec.base, values, self.sections)
        except UserError as err:
            raise spec.error(f"run '{name}': {err.detail}", None) from None
        facts = self.datasets.get((cfg.data.dataset, cfg.data.val_tokens))
        if self.sequential:  # a rule changes the shape: later rules must see it
            for rule in spec.rules:
                cfg = self._apply(rule, cfg, facts, {})
        elif spec.rules:
            derived_values: dict[str, Any] = {}
            for rule in spec.rules:
                self._apply(rule, cfg, facts, derived_values)
            cfg = self._with(cfg, derived_values, spec.rules[0].target)
        d = _derive(cfg, facts, self.derive_cache, spec, name)
        full = full_id(cfg)
        rid = id_of(full)
        self._check_unique(full, name)
        launcher = self.launcher_of(cfg, facts, d)
        try:
            memory = self.memory(cfg, d.vocab_size, launcher)
        except UserError as err:
            raise _run_error(spec, name, err) from None
        self.configs.append(cfg)
        self.derived.append(d)
        self.launchers.append(launcher)
        col = self.columns
        col["run_id"].append(rid)
        col["name"].append(name)
        col["run_dir"].append(f"{RUNS_FOLDER}/{run_dir_name(cfg, rid)}")
        for k in self.axis_keys:
            col[k].append(values[k])
        for k in self.derived_keys:
            col[k].append(keys.get_value(cfg, k))
        if spec.seeds is not None:
            col["seed"].append(seed)
        for k, v in zip(TABLE_COLUMNS, (*_row(d, cfg.member, launcher), *memory)):
            col[k].append(v)

    def _check_unique(self, full: str, name: str) -> None:
        """Refuse a second run of one identity, and a run-id collision (its true reason)."""
        try:
            owner = self.ids.owner(full, name)
        except IdCollision as err:
            raise self.spec.error(str(err), None) from None
        if owner is not None:
            raise self.spec.error(
                f"runs '{owner}' and '{name}' have the same identity (run id {id_of(full)}): "
                "they differ only in operational fields or in values that collapse after "
                "derive/rounding", None)

    def _apply(self, rule, cfg: RunConfig, facts, overlay: dict[str, Any]) -> RunConfig | None:
        """Evaluate ``rule`` on ``cfg`` (values in ``overlay`` take precedence). With an
        empty overlay, return cfg updated; else record the value in the overlay."""
        env = RuleEnv(cfg, facts, self.n_cache, self.spec, rule.target, overlay)
        value = env.evaluate(rule, keys.is_int(rule.target))
        if self.sequential:
            return self._with(cfg, {rule.target: value}, rule.target)
        overlay[rule.target] = value
        return None

    def _with(self, cfg: RunConfig, values: dict[str, Any], target: str) -> RunConfig:
        try:
            return keys.with_values(cfg, values, self.sections)
        except UserError as err:
            raise self.spec.error(f"run '{cfg.name}': {err.detail}", f"derive.{target}") from None

    def plan(self) -> Plan:
        table = pl.DataFrame(self.columns, strict=False)
        table = table.with_columns(pl.col("gpu_hours").cast(pl.Float64))
        return Plan(spec=self.spec, configs=self.configs, table=table, derived=self.derived,
                    axes=tuple(self.axis_cols), launchers=self.launchers)


def _axes(spec: Spec) -> list[tuple[tuple[str, ...], list[tuple[Any, ...]]]]:
    axes = [((k,), [(v,) for v in vals]) for k, vals in spec.grid.items()]
    for group in spec.zip:
        names = tuple(group)
        axes.append((names, list(zip(*(group[k] for k in names)))))
    return axes


def _row(d: Derived, member: int, launcher: LauncherConfig) -> tuple:
    if launcher.flops_per_gpu_s:
        hours = d.flops / launcher.flops_per_gpu_s / 3600
    elif launcher.throughput_tokens_per_gpu_s:
        hours = d.total_tokens / launcher.throughput_tokens_per_gpu_s / 3600
    else:
        hours = None
    return (member, d.n_params, d.n_params_non_embedding, d.unique_tokens, d.total_tokens,
            d.epochs, d.steps, d.flops, hours)


def _derive(cfg: RunConfig, facts, cache: dict, spec: Spec, name: str) -> Derived:
    key = (cfg.model, cfg.data, cfg.train, facts)
    hit = cache.get(key)
    if hit is None:
        try:
            hit = cache[key] = derive(
                cfg,
                vocab_size=facts.vocab_size if facts else None,
                train_tokens_available=facts.train_tokens if facts else None,
            )
        except UserError as err:
            raise _run_error(spec, name, err) from None
    return hit


def _run_error(spec: Spec, name: str, err: UserError) -> UserError:
    key = err.key
    if key and key.startswith(("data.", "model.", "train.", "optim.")):
        key = _where_set(spec, key)
    hint = ""
    if err.key == "data.vocab_size":
        hint = " (the dataset is not on this machine: set data.vocab_size in base)"
    return spec.error(f"run '{name}': {err.detail}{hint}", key)


def _where_set(spec: Spec, key: str) -> str:
    if key in spec.grid:
        return f"grid.{key}"
    for g, group in enumerate(spec.zip):
        if key in group:
            return f"zip[{g}].{key}"
    if key in spec.derive:
        return f"derive.{key}"
    if key.startswith("model.") and f"base.{key}" not in spec.lines:
        for where in ("grid.model.preset", "base.model.preset"):
            if where in spec.lines:
                return where
    return f"base.{key}"


def _label(key: str, value: Any) -> str:
    label = _LABELS.get(key, key.rsplit(".", 1)[-1])
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, int):
        text = _human_int(value)
    elif isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, (tuple, list)):
        text = ",".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value)
    elif value is None:
        text = "none"
    else:
        text = str(value).rstrip("/").rsplit("/", 1)[-1]
    return f"{label}{text}" if label else text


def _human_int(n: int) -> str:
    for div, suffix in ((10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= div and n % (div // 1000) == 0:
            return f"{n / div:.4g}{suffix}"
    return str(n)
