"""``scalelab explain A B``: which fields make two runs' ids differ (``scalelab/identity.py``).

A and B are run directories (``config.yaml`` written by the run, else the launcher's
``config-input.yaml``) or config YAML files. Every differing dotted field is listed,
split into identity fields (they change the run id) and operational fields
(``config.OPERATIONAL_KEYS``: they never do, so two runs differing only there share one
run id and one directory).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalelab import strict
from scalelab.config import OPERATIONAL_KEYS, RunConfig, load_run_config
from scalelab.errors import UserError
from scalelab.identity import full_id, id_of
from scalelab.store.layout import CONFIG_FILE, CONFIG_INPUT_FILE

__all__ = ["Explanation", "diff_configs", "explain", "load_config"]

_RUN_FILES = (CONFIG_FILE, CONFIG_INPUT_FILE)


@dataclass(frozen=True)
class Explanation:
    """The differences between two runs' configs."""

    a: str
    b: str
    full_a: str
    full_b: str
    """The full ids (sha256): what decides whether A and B are one run."""
    identity: list[tuple[str, Any, Any]]
    """(dotted key, value in A, value in B) for fields that enter the run id."""
    operational: list[tuple[str, Any, Any]]
    """The same for operational fields (never in the run id)."""

    @property
    def id_a(self) -> str:
        return id_of(self.full_a)

    @property
    def id_b(self) -> str:
        return id_of(self.full_b)

    @property
    def same_id(self) -> bool:
        return self.full_a == self.full_b

    def lines(self) -> list[str]:
        """Human-readable report, one fact per line."""
        out = [f"A: {self.a}  (run id {self.id_a})", f"B: {self.b}  (run id {self.id_b})"]
        if self.same_id:
            if self.operational:
                out.append(f"same run id {self.id_a}: only operational fields differ "
                           "(they never enter the run id):")
                out += [_fmt(d) for d in self.operational]
            else:
                out.append(f"same run id {self.id_a}: the configs are identical")
            return out
        if self.identity:
            out.append(f"{len(self.identity)} identity field(s) differ (these change the run id):")
            out += [_fmt(d) for d in self.identity]
        else:
            out.append("no config field differs, yet the ids do: the identity rule changed "
                       "between the versions that wrote them")
        if self.operational:
            out.append(f"{len(self.operational)} operational field(s) also differ "
                       "(not part of the run id):")
            out += [_fmt(d) for d in self.operational]
        return out


def load_config(path: str | Path) -> RunConfig:
    """A RunConfig from a run directory or a config YAML file."""
    path = Path(path)
    if path.is_dir():
        for name in _RUN_FILES:
            if (path / name).is_file():
                return load_run_config(path / name)
        raise UserError(f"no {' or '.join(_RUN_FILES)} in this directory", file=str(path))
    if not path.exists():
        raise UserError("no such run directory or config file", file=str(path))
    return load_run_config(path)


def diff_configs(a: RunConfig, b: RunConfig) -> tuple[list, list]:
    """(identity diffs, operational diffs), each a sorted list of (key, value A, value B)."""
    flat_a, flat_b = _flatten(strict.to_dict(a)), _flatten(strict.to_dict(b))
    identity, operational = [], []
    for key in sorted(set(flat_a) | set(flat_b)):
        va, vb = flat_a.get(key, _MISSING), flat_b.get(key, _MISSING)
        if va == vb and type(va) is type(vb):
            continue
        row = (key, va, vb)
        (operational if key in OPERATIONAL_KEYS else identity).append(row)
    return identity, operational


def explain(a: str | Path, b: str | Path) -> Explanation:
    """Compare the runs at ``a`` and ``b`` (run directories or config files)."""
    cfg_a, cfg_b = load_config(a), load_config(b)
    identity, operational = diff_configs(cfg_a, cfg_b)
    return Explanation(str(a), str(b), full_id(cfg_a), full_id(cfg_b), identity, operational)


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


_MISSING = _Missing()


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and (tree or not prefix):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: tree}


def _fmt(row: tuple[str, Any, Any]) -> str:
    key, va, vb = row
    return f"  {key}: {va!r} -> {vb!r}"
