"""``blocks:`` — one sweep spec holding several sub-studies (recipes) with their own axes.

Kim et al.'s study (2025, arXiv 2509.14786) is one sweep of differently shaped parts: a tuned grid
(standard and regularized recipes), ensemble members at their own hyperparameters, and
distilled students whose teachers are runs of the same sweep. A spec with ``blocks``
expands each block as a spec of its own and concatenates the plans:

    name: tiny_infinite_compute
    base: {...}                      # shared defaults
    launcher: {...}                  # shared (never in run ids)
    blocks:
      - name: tuned                  # required, unique; prefixes the run names
        grid: {...}
      - name: ensemble
        base: {extra: {recipe: ensemble}}   # deep-merged over the top-level base
        zip: [...]
        members: 4
      - name: distill
        base: {distill: {teacher: {extra.recipe: ensemble}, synthetic_weight: 0.75, ...}}
        launcher: {gpus_per_node: 4, env: {NCCL_DEBUG: WARN}}   # its own resources

A block may set ``base`` (deep-merged over the top-level base), ``launcher`` (deep-merged
over the top-level launcher: a list such as ``setup`` replaces, ``env`` adds keys; not the
sweep-wide ``executor``, ``root``, ``max_parallel``; a key set here wins over an inherited
``derive`` rule of it: ``scalelab.sweep.plan.resources``), ``derive`` (merged over the top-level
rules), and its own ``grid``, ``zip``, ``members``, ``seeds`` (not inherited:
a block without them is one run per member/seed). When the top level has a ``grid`` or
``zip`` of its own, it is expanded too, first, as the block named ``TOP_BLOCK`` ('tuned'),
so a plain sweep (and ``scalelab tune`` on it) keeps working when blocks are added. Students' ``distill.teacher``
selectors are resolved against the runs of their own and all earlier blocks (``scalelab.distill.resolve``), before run
ids are computed, so a student's id names its teachers. The plan table gains a ``block`` column.
A run that two blocks both produce (same run id, e.g. ensemble member 0 and a tuned-grid
point) is planned once, under the first block.
"""

from __future__ import annotations

import re
from typing import Any

from scalelab import strict
from scalelab.errors import UserError, did_you_mean
from scalelab.sweep.spec.launcher import PREFIX, SWEEP_WIDE, check_launcher
from scalelab.sweep.spec.located import Located
from scalelab.sweep.spec.sections import LauncherConfig

__all__ = ["BLOCK_KEYS", "TOP_BLOCK", "parse_blocks"]

BLOCK_KEYS = ("name", "base", "grid", "zip", "derive", "members", "seeds", "launcher")
TOP_BLOCK = "tuned"
"""Name of the block the top level's own grid/zip forms (when it has one)."""
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_blocks(loc: Any, data: dict, text: str, validate) -> tuple[tuple[str, Any], ...]:
    """Validate ``data['blocks']``; returns ((block name, Spec), ...). ``validate`` is
    ``spec._validate`` (each block is validated as a whole spec)."""
    raw = data.get("blocks")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise loc.error("expected a non-empty list of blocks (mappings)", "blocks")
    out, names = [], set()
    for i, block in enumerate(raw):
        path = f"blocks[{i}]"
        if not isinstance(block, dict):
            raise loc.error("expected a mapping", path)
        for key in block:
            if key not in BLOCK_KEYS:
                raise loc.error(f"unknown key{did_you_mean(key, BLOCK_KEYS)}", f"{path}.{key}")
        name = block.get("name")
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise loc.error("required: a block name of letters, digits, '_', '.', '-'", f"{path}.name")
        if name in names:
            raise loc.error(f"block name '{name}' appears twice", f"{path}.name")
        if name == TOP_BLOCK and (data.get("grid") or data.get("zip")):
            raise loc.error(f"'{TOP_BLOCK}' names the top level's own grid here; rename this block",
                            f"{path}.name")
        names.add(name)
        if block.get("base") is not None and not isinstance(block["base"], dict):
            raise loc.error("expected a mapping", f"{path}.base")
        if block.get("derive") is not None and not isinstance(block["derive"], dict):
            raise loc.error("expected a mapping", f"{path}.derive")
        merged = {k: v for k, v in data.items() if k not in ("blocks", "grid", "zip", "members", "seeds", "tune")}
        merged["base"] = _merge(data.get("base") or {}, block.get("base") or {})
        merged["derive"] = {**(data.get("derive") or {}), **(block.get("derive") or {})} or None
        if block.get("launcher") is not None:
            merged["launcher"] = _block_launcher(loc, path, data, block, merged["derive"])
        for key in ("grid", "zip", "members", "seeds"):
            if key in block:
                merged[key] = block[key]
        lines = dict(loc.lines)
        prefix = path + "."
        for key_path, line in loc.lines.items():
            if key_path.startswith(prefix):
                lines[key_path[len(prefix):]] = line
        spec = validate(Located(data=merged, file=loc.file, lines=lines, text=text), text)
        out.append((name, spec))
    return tuple(out)


def _block_launcher(loc: Any, path: str, data: dict, block: dict, rules: dict | None) -> dict:
    """The block's ``launcher`` merged over the top level's (checked; errors name the
    block's key); the inherited rules of keys it sets are dropped from ``rules``."""
    own = block["launcher"]
    if not isinstance(own, dict):
        raise loc.error("expected a mapping", f"{path}.launcher")
    for key in own:
        where = f"{path}.launcher.{key}"
        if key in SWEEP_WIDE:
            raise loc.error("sweep-wide: set it in the top-level launcher", where)
        target = PREFIX + str(key)
        if target in (block.get("derive") or {}):
            raise loc.error(f"also derived by this block's derive.{target}; keep one", where)
        if rules:
            rules.pop(target, None)  # the block's value wins over an inherited rule
    merged = _merge(data.get("launcher") or {}, own)
    try:
        check_launcher(strict.build(LauncherConfig, merged, path=f"{path}.launcher"),
                                 f"{path}.launcher")
    except UserError as err:
        raise loc.error(err.detail, err.key) from None
    return merged
