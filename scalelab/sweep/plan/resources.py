"""Resources per run: the launcher each run is submitted with.

The spec's ``launcher`` is every run's default. A block's ``launcher`` is merged over it
(``scalelab.sweep.spec.blocks``), and ``derive`` rules on numeric launcher keys compute it per run:

    derive:
      launcher.gpus_per_node: "1 if N < 5e8 else 4"
      launcher.tasks_per_node: "launcher.gpus_per_node"
      launcher.time_min: "ladder(1.5 * FLOPs / (launcher.gpus_per_node
                                 * launcher.flops_per_gpu_s) / 60 + 20, 60, 240, 720, 1440)"

Launcher rules run after the run's config is derived. Besides what every rule reads (N,
N_non_embedding, numeric config keys, after their own rules) they read ``RUN_NAMES``: FLOPs
(the run's training FLOPs C), D (its training tokens, U·E rounded down to whole steps) and
steps (``scalelab.derive``), and the numeric ``launcher.*`` keys: the block's values, or
what another launcher rule derived. Config rules read none of these. A rule wins over the
launcher value of its own level (as over ``base``); a block's own ``launcher`` value wins
over a rule it inherits. ``SWEEP_WIDE`` keys are neither per block nor derived.

Runs whose launchers would submit differently go out as separate job arrays (``groups``);
``ladder`` in a rule keeps their number small. The launcher never enters a run id: it is
no part of RunConfig (``scalelab.identity``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_type_hints

from scalelab import strict
from scalelab.errors import UserError
from scalelab.sweep.plan.rule_env import RuleEnv
from scalelab.sweep.spec.keys import is_int_type
from scalelab.sweep.spec.launcher import NOT_SUBMITTED, PREFIX, SHOWN, check_launcher, numeric_keys
from scalelab.sweep.spec.sections import LauncherConfig

if TYPE_CHECKING:
    from scalelab.sweep.spec.load import Spec

__all__ = ["LauncherRules", "describe", "groups", "launchers_of", "summary"]


class LauncherRules:
    """The launcher of each run of ``spec``: its launcher with ``spec.launcher_rules``
    applied (equal results share one object)."""

    def __init__(self, spec: Spec, n_cache: dict):
        self.spec, self.n_cache = spec, n_cache
        self.base = {key: getattr(spec.launcher, key[len(PREFIX):]) for key in numeric_keys()}
        hints = get_type_hints(LauncherConfig)
        self.integer = {r.target: is_int_type(hints[r.target[len(PREFIX):]])
                        for r in spec.launcher_rules}
        self.made: dict[tuple, LauncherConfig] = {}

    def __call__(self, cfg: Any, facts: Any, derived: Any) -> LauncherConfig:
        rules = self.spec.launcher_rules
        if not rules:
            return self.spec.launcher
        overlay = {"FLOPs": derived.flops, "D": derived.total_tokens, "steps": derived.steps,
                   **self.base}
        for rule in rules:
            env = RuleEnv(cfg, facts, self.n_cache, self.spec, rule.target, overlay)
            overlay[rule.target] = env.evaluate(rule, self.integer[rule.target])
        values = tuple((rule.target[len(PREFIX):], overlay[rule.target]) for rule in rules)
        hit = self.made.get(values)
        if hit is None:
            hit = self.made[values] = self._make(dict(values), cfg.name)
        return hit

    def _make(self, values: dict[str, Any], run: str) -> LauncherConfig:
        launcher = dataclasses.replace(self.spec.launcher, **values)
        try:
            check_launcher(launcher)
        except UserError as err:
            raise self.spec.error(f"run '{run}': {err.detail}", f"derive.{err.key}") from None
        return launcher


def launchers_of(plan: Any, default: LauncherConfig) -> list[LauncherConfig]:
    """One launcher per plan row: the plan's own (``Plan.launchers``; a None entry, e.g. a
    run launched before launchers were recorded, and a plan without them get ``default``)."""
    own = list(getattr(plan, "launchers", None) or [])
    if not own:
        return [default] * len(plan.configs)
    return [launcher or default for launcher in own]


def _submission(launcher: LauncherConfig) -> str:
    tree = strict.to_dict(launcher)
    for name in NOT_SUBMITTED:
        tree.pop(name, None)
    return json.dumps(tree, sort_keys=True, default=str)


def groups(launchers: Sequence[LauncherConfig]) -> list[tuple[LauncherConfig, list[int]]]:
    """(launcher, row indices) per distinct submission, in order of first appearance."""
    keys: dict[int, str] = {}
    out: dict[str, tuple[LauncherConfig, list[int]]] = {}
    for i, launcher in enumerate(launchers):
        key = keys.get(id(launcher))
        if key is None:
            key = keys[id(launcher)] = _submission(launcher)
        out.setdefault(key, (launcher, []))[1].append(i)
    return list(out.values())


def describe(launcher: LauncherConfig) -> str:
    """Short resources per job: '4 GPU · mem 256G · 24h00', '2×8 GPU · 4h00', '2 CPU · 1h00'
    (nodes × per node; mem when set)."""
    nodes = f"{launcher.nodes}×" if launcher.nodes > 1 else ""
    if launcher.gpus_per_node:
        what = f"{nodes}{launcher.gpus_per_node} GPU"
    else:
        what = f"{nodes}{launcher.tasks_per_node * launcher.cpus_per_task} CPU"
    mem = f" · mem {launcher.mem_gb:g}G" if launcher.mem_gb else ""
    hours, minutes = divmod(int(launcher.time_min), 60)
    return f"{what}{mem} · {hours}h{minutes:02d}"


def summary(launchers: Sequence[LauncherConfig], default: LauncherConfig) -> list[str]:
    """One line per submission group: its resources, the other submitted keys where they
    differ from ``default`` (the spec's launcher; ``mem_gb=512``), and its run count."""
    base = strict.to_dict(default)
    lines = []
    for launcher, rows in groups(launchers):
        tree = strict.to_dict(launcher)
        extra = "".join(f" · {k}={json.dumps(v)}" for k, v in tree.items()
                        if k not in SHOWN and k not in NOT_SUBMITTED and v != base.get(k))
        lines.append(f"{describe(launcher)}{extra}: {len(rows)} run{'s' if len(rows) != 1 else ''}")
    return lines
