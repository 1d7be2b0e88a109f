"""Argument and state_dict checks shared by ``optim.AdamW``, ``optim.Muon`` and ``optim.Scion``.

Every check raises a one-line ``ValueError`` that names the optimizer, the argument, the value
and what is allowed (a did-you-mean for string choices). The range rules mirror
``torch.optim`` where torch has them (lr, eps, weight_decay >= 0; betas in [0, 1)).

Result-changing settings that are not param-group keys (stochastic rounding, seed, Newton-Schulz
dtype and backend, foreach, distributed mode) travel in ``state_dict()["settings"]`` as plain
str/int/float/bool/None values, so ``torch.load(weights_only=True)`` still reads the state_dict;
``check_saved_settings`` refuses a load whose saved settings differ from the optimizer's.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "SETTINGS_KEY",
    "check_bool",
    "check_choice",
    "check_dense_grads",
    "check_group_keys",
    "check_int",
    "check_range",
    "check_real_params",
    "check_saved_groups",
    "check_saved_settings",
    "dtype_name",
    "repr_with_settings",
    "triton_available",
]

SETTINGS_KEY = "settings"
"""The ``state_dict()`` key that holds the optimizer-level settings (``check_saved_settings``)."""


def _as_float(owner: str, name: str, value: Any) -> float:
    """``value`` as a Python float (a 0-d or 1-element tensor included), else a ValueError."""
    if torch.is_tensor(value):
        if value.numel() != 1:
            raise ValueError(f"{owner}: {name} must be a number or a 1-element tensor, got shape {tuple(value.shape)}")
        return float(value.item())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{owner}: {name} must be a number, got {value!r}")
    return float(value)


def check_range(owner: str, name: str, value: Any, lo: float, hi: float = math.inf, *, hi_open: bool = False) -> None:
    """``lo <= value <= hi`` (``< hi`` with ``hi_open``); NaN is refused."""
    x = _as_float(owner, name, value)
    ok = lo <= x and (x < hi if hi_open else x <= hi)
    if not ok:
        allowed = f"in [{lo:g}, {hi:g})" if hi_open else (f">= {lo:g}" if hi == math.inf else f"in [{lo:g}, {hi:g}]")
        raise ValueError(f"{owner}: {name} must be {allowed}, got {value!r}")


def check_int(owner: str, name: str, value: Any, minimum: int) -> None:
    """An int (not a bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}: {name} must be an int >= {minimum}, got {value!r}")


def check_bool(owner: str, name: str, value: Any) -> None:
    """True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{owner}: {name} must be True or False, got {value!r}")


def check_choice(owner: str, name: str, value: Any, choices: Sequence[str]) -> None:
    """One of ``choices``, with a did-you-mean for near misses."""
    if isinstance(value, str) and value in choices:
        return
    close = difflib.get_close_matches(str(value), list(choices), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"{owner}: {name} must be one of {tuple(choices)}, got {value!r}{hint}")


METADATA_KEYS = frozenset({
    "params", "param_names", "name",  # torch's named param groups; a label trainers often add
    "initial_lr", "max_lr", "min_lr", "base_momentum", "max_momentum",  # torch's LR schedulers
    "base_lr",  # a peak lr trainers keep beside the scheduled one (scalelab's does)
})
"""Group keys accepted beside an optimizer's own (``check_group_keys``): they change nothing in
the update."""


def check_group_keys(owner: str, group: Mapping[str, Any], known: Iterable[str]) -> None:
    """Refuse a group key that is neither one of ``known`` (the optimizer's own) nor a
    ``METADATA_KEYS`` one, with a did-you-mean: a misspelled key (``"use_muonn": False``) would
    otherwise be ignored and its group stepped with the default."""
    allowed = set(known) | METADATA_KEYS
    for key in group:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"{owner}: unknown param group key {key!r}{hint} (known: {', '.join(sorted(set(known) - {'params'}))})"
        )


def triton_available() -> bool:
    """Whether the triton package is importable (``optim.kernels.HAS_TRITON``)."""
    from optim.kernels import HAS_TRITON

    return HAS_TRITON


def check_real_params(owner: str, params: Iterable[torch.Tensor], what: str) -> None:
    """Refuse complex params where the update is not elementwise (an orthogonalisation or a
    norm LMO), as ``torch.optim.Muon`` refuses them."""
    for p in params:
        if torch.is_complex(p):
            raise ValueError(
                f"{owner}: complex parameters are not supported for {what} "
                f"(got a {p.dtype} param of shape {tuple(p.shape)}); torch.optim.Muon refuses them too"
            )


def check_dense_grads(owner: str, groups: Iterable[Mapping[str, Any]]) -> None:
    """torch.optim's RuntimeError for a sparse gradient, before any state changes."""
    for group in groups:
        for p in group["params"]:
            if p.grad is not None and p.grad.is_sparse:
                raise RuntimeError(f"{owner} does not support sparse gradients")


def dtype_name(dtype: torch.dtype) -> str:
    """'bfloat16' for torch.bfloat16: the plain string a state_dict stores."""
    return str(dtype).removeprefix("torch.")


def check_saved_groups(owner: str, state_dict: Mapping[str, Any], required: Iterable[str]) -> None:
    """Refuse a state_dict whose param groups lack a key this optimizer needs (a foreign one,
    e.g. ``torch.optim.Muon``'s has no ``use_muon``), before anything is loaded."""
    need = set(required)
    for i, group in enumerate(state_dict.get("param_groups", [])):
        missing = sorted(need - set(group))
        if missing:
            raise ValueError(
                f"{owner}.load_state_dict: param group {i} lacks {missing}: not a state_dict saved "
                f"by optim.{owner} (another optimizer's, e.g. torch.optim.{owner}?)"
            )


TOPOLOGY_SETTINGS = frozenset({"distributed_mode"})
"""Settings recorded (``repr``, ``state_dict``) but not enforced on load: how the work is split
over ranks, which a resume may change with the world size and the parallelism (DCP reshards
the state; the update's math is the same)."""


def check_saved_settings(owner: str, state_dict: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Refuse a state_dict whose saved settings differ from ``current`` (but the
    ``TOPOLOGY_SETTINGS``); warn (and load) when it has none (saved before settings were
    recorded: nothing can be checked)."""
    saved = state_dict.get(SETTINGS_KEY)
    if saved is None:
        warnings.warn(
            f"{owner}.load_state_dict: the state_dict records no settings (saved by an older optim "
            f"or rebuilt without its '{SETTINGS_KEY}' key); loading without checking {sorted(current)}",
            UserWarning,
            stacklevel=3,
        )
        return
    for key, value in current.items():
        if key in TOPOLOGY_SETTINGS:
            continue
        if key not in saved:
            raise ValueError(f"{owner}.load_state_dict: the saved settings lack {key!r} (this optimizer: {value!r})")
        if saved[key] != value:
            raise ValueError(
                f"{owner}.load_state_dict: setting {key!r} was {saved[key]!r} when saved, "
                f"this optimizer has {value!r}; construct it with {key}={saved[key]!r} to resume"
            )


def repr_with_settings(base: str, settings: Mapping[str, Any]) -> str:
    """torch's ``Optimizer.__repr__`` text with a "Settings" block before its closing ')'."""
    lines = "".join(f"    {k}: {v}\n" for k, v in settings.items())
    return f"{base[:-1]}\nSettings\n{lines})"
