"""Scion: (unconstrained) stochastic conditional gradient with per-layer norm LMOs.

Pethick et al., *Training Deep Learning Models with Norm-Constrained LMOs*
(arXiv 2502.07529; LIONS-EPFL/scion).

Per parameter W with gradient g, momentum ``β = momentum`` (= 1 - α in Scion's
convention), radius ρ = ``scale``, step γ = ``lr``, norm LMO s(·) (``optim.lmo``):

    d ← (1 - α)·d + α·g          (zero init; α = 1 - β; β = 0 means d = g)
    SCG  (constrained=True):   W ← (1 - γ)·W - γ·ρ·s(d)
    uSCG (constrained=False):  W ← W - γ·ρ·s(d)

SCG is the Frank–Wolfe step: if ‖W‖ ≤ ρ at init (``Scion.init``), it stays inside.
In AdamW form W ← W(1 - η·λ) - η·s(d), SCG is η = γρ, λ = 1/ρ.

Distributed (after Dion, arXiv 2504.05295), with W > 1 ranks: ``distributed_mode="ddp"``
runs the Spectral LMOs of replicated params through ``optim.distributed.ddp_matrix_apply``
(a FLOP-balanced 1/W share per rank, then all-gather); FSDP2 ``Shard(0)`` DTensor params go through
``fsdp_matrix_apply`` (owner-based all_to_all) in modes "auto" and "fsdp". Row-wise LMOs (Sign, RowNorm,
ColNorm(transpose)) run on the local shard with no communication; the rest (ColNorm on
columns, BiasRMS) gather the full tensor, which is small for the vectors they serve.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from ._hyper import as_tensor, is_compiling, tensorize_group_
from ._param_io import advance_steps_, local, params_with_grads, restore_fp32_state, write_param_
from ._roles import EMBED_NAMES, HEAD_NAMES, param_roles, warn_likely_heads
from ._settings_state import SettingsState
from ._validate import (
    SETTINGS_KEY,
    check_bool,
    check_choice,
    check_dense_grads,
    check_group_keys,
    check_int,
    check_range,
    check_real_params,
    check_saved_groups,
    check_saved_settings,
    repr_with_settings,
)
from .fused_qkv import split_fused
from .lmo import (
    LMO,
    Auto,
    BiasRMS,
    ColNorm,
    Sign,
    Spectral,
    SpectralConv,
    norm_from_spec,
    resolve_norm,
)

__all__ = ["Scion", "scion_param_groups"]

MODES = ("auto", "none", "ddp", "fsdp")


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__name__ == "DTensor"


def _world(group) -> int:
    d = torch.distributed
    return d.get_world_size(group) if d.is_available() and d.is_initialized() else 1


def _is_spectral(lmo: LMO, ndim: int) -> bool:
    """2-D matrices whose LMO is a polar factor: the ones worth distributing (conv filters,
    whose shape factor depends on the kernel size, stay on the local path)."""
    return ndim == 2 and isinstance(lmo, (Spectral, Auto))


def _whole_rows(t: torch.Tensor) -> bool:
    """True when every placement of DTensor ``t`` is Replicate or Shard(0): local rows are whole."""
    return all(p.is_replicate() or (p.is_shard() and p.dim == 0) for p in t.placements)


def _local_rows(full: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """The block of ``full`` (global shape) that DTensor ``p`` holds locally."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
    return full[tuple(slice(o, o + n) for o, n in zip(offset, shape))]


class Scion(SettingsState, torch.optim.Optimizer):
    """Scion / uSCG optimizer (a ``torch.optim.Optimizer``); see the module docstring.

    Args:
        params: params or group dicts; a group may set lr, momentum, norm, norm_kwargs,
            scale, constrained, init.
        lr: γ (float or 0-D tensor; held per group as a 0-D float64 tensor, ``optim._hyper``).
            LIONS-EPFL/scion's class default 1e-3.
        momentum: β = 1 - α. Default 0.9 = the recommended α = 0.1 (LIONS-EPFL/scion);
            LIONS-EPFL/scion's class default α = 1 is ``momentum=0``.
        norm: an ``optim.lmo`` instance or its name ('Auto', 'Spectral', 'ColNorm', ...).
        norm_kwargs: keyword arguments when ``norm`` is a name.
        scale: radius ρ.
        constrained: SCG (True, default) or uSCG (False).
        stochastic_rounding: write bf16 params with ``optim.stochastic_round_`` (else nearest).
        seed: SR and ``init`` seed; the same on every rank.
        distributed_mode: "auto" (FSDP2 path for DTensor params, local otherwise), "ddp"
            (replicated params: split the Spectral work over ranks), "fsdp", or "none".
            As ``optim.Muon``: DDP is never assumed, ask for it.
        process_group: group for "ddp" (default: the world) and "fsdp" (default: the mesh's).

    Every argument and group key is checked at construction (ValueError naming it: lr >= 0,
    momentum in [0, 1), scale >= 0, constrained and init bools, a known norm). Complex params
    are refused (the LMOs are real), sparse gradients raise torch's RuntimeError. State is
    created lazily, at the first step where a param has a grad (as ``torch.optim``).
    ``state_dict()["settings"]`` records stochastic_rounding, seed and distributed_mode;
    ``load_state_dict`` refuses a state_dict whose settings differ or whose groups lack Scion's
    keys, and warns on one with no settings.
    A 3-D weight [E, out, in] in a ``Spectral()`` group is a batch of E matrices, each with its
    own polar factor (``Auto`` and ``scion_param_groups`` treat ≥3-D weights as conv filters).
    """

    _SETTINGS = ("stochastic_rounding", "seed", "distributed_mode", "process_group")
    _SHARED = ("process_group",)

    def __init__(
        self,
        params,
        lr: float | torch.Tensor = 1e-3,
        momentum: float = 0.9,
        norm: str | LMO = "Auto",
        norm_kwargs: dict | None = None,
        scale: float = 1.0,
        constrained: bool = True,
        *,
        stochastic_rounding: bool = False,
        seed: int = 0,
        distributed_mode: str = "auto",
        process_group=None,
    ):
        defaults = {
            "lr": lr, "momentum": momentum, "norm": norm, "norm_kwargs": norm_kwargs or {},
            "scale": scale, "constrained": constrained, "init": True,
        }  # fmt: skip
        check_bool("Scion", "stochastic_rounding", stochastic_rounding)
        check_int("Scion", "seed", seed, 0)
        check_choice("Scion", "distributed_mode", distributed_mode, MODES)
        self.stochastic_rounding = stochastic_rounding
        self.seed = seed
        self.distributed_mode = distributed_mode
        self.process_group = process_group
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """Validate the group and resolve its ``norm`` (state comes at the param's first grad)."""
        if "unconstrained" in param_group:
            raise ValueError("Scion: use constrained=False instead of unconstrained=True")
        check_group_keys("Scion", param_group, self.defaults)
        own_kwargs = "norm_kwargs" in param_group or "norm" not in param_group
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        check_range("Scion", "lr", group["lr"], 0.0)
        check_range("Scion", "momentum (= 1 - alpha)", group["momentum"], 0.0, 1.0, hi_open=True)
        check_range("Scion", "scale", group["scale"], 0.0)
        check_bool("Scion", "constrained", group["constrained"])
        check_bool("Scion", "init", group["init"])
        check_real_params("Scion", group["params"], "norm LMOs")
        kwargs = group.pop("norm_kwargs", {})
        group["norm"] = resolve_norm(group["norm"], **(kwargs if own_kwargs else {}))
        for p in group["params"]:  # each norm's rank rule now, not an IndexError at step()
            problem = group["norm"].shape_problem(tuple(p.shape))
            if problem:
                raise ValueError(
                    f"Scion: norm {group['norm'].name} cannot take the param of shape {tuple(p.shape)} in "
                    f"param group {len(self.param_groups) - 1}: {problem}"
                )
        tensorize_group_(group, self.defaults)

    def settings(self) -> dict[str, bool | int | str]:
        """The result-changing settings that are not param-group keys (saved in ``state_dict``)."""
        return {"stochastic_rounding": self.stochastic_rounding, "seed": self.seed,
                "distributed_mode": self.distributed_mode}

    def __repr__(self) -> str:
        return repr_with_settings(super().__repr__(), self.settings())

    def _init_state(self, p: torch.Tensor) -> None:
        st = self.state[p]
        if not st:
            st["step"] = torch.tensor(0.0, dtype=torch.float32)
            st["momentum_buffer"] = torch.zeros_like(p, dtype=torch.float32)

    def state_dict(self) -> dict:
        """As torch's, with each group's ``norm`` as a plain dict (``LMO.to_spec``), so the
        state_dict loads with ``torch.load(weights_only=True)``."""
        sd = super().state_dict()
        for group in sd["param_groups"]:  # fresh dicts: the live groups keep their LMOs
            if isinstance(group.get("norm"), LMO):
                group["norm"] = group["norm"].to_spec()
        return {**sd, SETTINGS_KEY: self.settings()}

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, after refusing a foreign state_dict or different settings; LMOs rebuilt from
        their specs, fp32 state kept."""
        check_saved_groups("Scion", state_dict, [k for k in self.defaults if k != "norm_kwargs"])
        check_saved_settings("Scion", state_dict, self.settings())
        groups = [{**g, "norm": norm_from_spec(g["norm"])} if isinstance(g.get("norm"), dict) else g
                  for g in state_dict["param_groups"]]
        super().load_state_dict({**state_dict, "param_groups": groups})
        restore_fp32_state(self, state_dict)

    @torch.no_grad()
    def init(self, *, seed: int | None = None) -> None:
        """Set every param of groups with ``init=True`` to its norm-matched init × ρ.

        Seeded (default ``self.seed``), so every rank draws the same tensors; a DTensor
        param gets its local block of the full init.
        """
        gen = torch.Generator().manual_seed(self.seed if seed is None else int(seed))
        for group in self.param_groups:
            if not group["init"]:
                continue
            lmo, rho = group["norm"], float(group["scale"])
            for p in group["params"]:
                full = torch.empty(p.shape, dtype=torch.float32)
                lmo.init_(full, generator=gen).mul_(rho)
                block = _local_rows(full, p) if _is_dtensor(p) else full
                local(p).copy_(block.to(device=local(p).device))

    def _directions(self, group: dict, bufs: list[torch.Tensor]) -> list[torch.Tensor]:
        """s(d) for each momentum buffer of a group, as local fp32 tensors."""
        lmo: LMO = group["norm"]
        out: list[torch.Tensor | None] = [None] * len(bufs)
        ddp, fsdp, loc = [], [], []
        multi = _world(self.process_group) > 1
        use_fsdp = multi and self.distributed_mode in ("auto", "fsdp")
        use_ddp = multi and self.distributed_mode == "ddp"
        for i, d in enumerate(bufs):
            if _is_dtensor(d):
                if _is_spectral(lmo, d.ndim) and use_fsdp:
                    fsdp.append(i)
                elif lmo.is_rowwise() and _whole_rows(d):
                    out[i] = lmo.direction(d.to_local())
                else:
                    out[i] = _local_rows(lmo.direction(d.full_tensor()), d)
            elif _is_spectral(lmo, d.ndim):
                (ddp if use_ddp else loc).append(i)
            else:
                out[i] = lmo.direction(d)
        if ddp or fsdp or loc:
            from . import distributed as dist_ops

            # the matrix maps call fn on same-shape stacks [B, m, n]: Spectral is batched
            fn = (lmo.pick(2) if isinstance(lmo, Auto) else lmo).direction
            for i, r in zip(loc, dist_ops.local_matrix_apply([bufs[i] for i in loc], fn)):
                out[i] = r
            if ddp:
                res = dist_ops.ddp_matrix_apply([bufs[i] for i in ddp], fn, group=self.process_group)
                for i, r in zip(ddp, res):
                    out[i] = r
            if fsdp:
                res = dist_ops.fsdp_matrix_apply([bufs[i] for i in fsdp], fn, group=self.process_group)
                for i, r in zip(fsdp, res):
                    out[i] = local(r)
        return out

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_dense_grads("Scion", self.param_groups)
        for group, live, pids in params_with_grads(self.param_groups):
            for p in live:
                self._init_state(p)
            lr, beta, rho = group["lr"], group["momentum"], float(group["scale"])
            if is_compiling():  # numbers as tensors: a changed float is a graph input (optim._hyper)
                lr, beta = as_tensor(lr), as_tensor(beta)
            # the steps as ints only for SR, whose key they are (one host read per group)
            counts = advance_steps_([self.state[p]["step"] for p in live], foreach=False,
                                    sr=self.stochastic_rounding)
            bufs = []
            for p in live:
                d = self.state[p]["momentum_buffer"]
                g = p.grad.to(torch.float32)
                if torch.is_tensor(beta):  # d·β + g·(1 - β): d = g at β = 0, no branch on β
                    d.mul_(beta).add_(g * (1 - beta))
                elif beta == 0.0:
                    d.copy_(g)
                else:  # d ← (1 - α)d + αg, α = 1 - β
                    d.mul_(beta).add_(g, alpha=1.0 - beta)
                bufs.append(d)
            for i, (p, s, pid) in enumerate(zip(live, self._directions(group, bufs), pids)):
                w = local(p) if p.dtype == torch.float32 else local(p).to(torch.float32)
                if group["constrained"]:
                    w.mul_(1 - lr)
                if torch.is_tensor(lr):
                    w.sub_(s * (lr * rho))
                else:
                    w.add_(s, alpha=-lr * rho)
                sr = self.stochastic_rounding and local(p).dtype == torch.bfloat16
                write_param_(
                    p, w, stochastic_rounding=self.stochastic_rounding, seed=self.seed,
                    step=counts[i] if sr else 0, param_id=pid,
                )  # fmt: skip
        return loss


def scion_param_groups(
    model: nn.Module,
    *,
    embed_scale: float = 1.0,
    hidden_scale: float = 3.0,
    head_scale: float = 10.0,
    vectors: str = "bias_rms",
    vector_scale: float = 1.0,
    embed_names: Iterable[str] = EMBED_NAMES,
    head_names: Iterable[str] = HEAD_NAMES,
    fused_qkv: str = "split",
) -> list[dict]:
    """Scion param groups for a Llama-style model with the published untied defaults.

    embedding ColNorm(transpose) ρ = 1; hidden matrices Spectral ρ = 3 (≥3-D: SpectralConv);
    head Sign ρ = 10 (LIONS-EPFL/scion untied GPT). Use with
    ``Scion(groups, lr=γ, momentum=0.9)`` (α = 0.1, the published value).

    vectors: "bias_rms" puts 1-D gains/biases in a BiasRMS group with ρ = ``vector_scale``,
        ``constrained=False`` (uSCG: SCG would pull RMSNorm gains of 1 into the ρ-ball) and
        ``init=False`` (``Scion.init`` keeps the module's own init, e.g. ones; BiasRMS's
        zero init would silence RMSNorm). "exclude" leaves them out: optimize them elsewhere.
    Tied embedding/head weights join the head (Sign) group, as the published tied recipe.
    Frozen params (``requires_grad=False``) are left out, as in ``optim.muon_param_groups``.
    fused_qkv: "split" gives fused [3·d, d] QKV weights (``optim.fused_qkv``) their own group
        with ``Spectral(blocks=3)``: one polar factor per Q/K/V block; a weight named like one
        whose blocks cannot be told stays whole, with one warning. "whole": no special case.
    """
    if vectors not in ("bias_rms", "exclude"):
        raise ValueError(f"scion_param_groups: vectors must be 'bias_rms' or 'exclude', got {vectors!r}")
    by_role: dict[str, list] = {"embed": [], "hidden": [], "head": [], "vector": []}
    rows = param_roles(model, embed_names=embed_names, head_names=head_names)
    warn_likely_heads(model, [r for r in rows if r[1].requires_grad], "scion_param_groups")
    for name, p, role in rows:
        if p.requires_grad:
            by_role[role].append((name, p))
    hidden_2d, fused = split_fused(
        [(n, p) for n, p in by_role["hidden"] if p.ndim == 2], fused_qkv, "scion_param_groups"
    )
    by_role = {role: [p for _, p in named] for role, named in by_role.items()}
    hidden_conv = [p for p in by_role["hidden"] if p.ndim >= 3]
    groups = [
        {"params": by_role["embed"], "norm": ColNorm(transpose=True), "scale": embed_scale},
        {"params": hidden_2d, "norm": Spectral(), "scale": hidden_scale},
        {"params": fused, "norm": Spectral(blocks=3), "scale": hidden_scale},
        {"params": hidden_conv, "norm": SpectralConv(), "scale": hidden_scale},
        {"params": by_role["head"], "norm": Sign(), "scale": head_scale},
    ]
    if vectors == "bias_rms":
        groups.append(
            {"params": by_role["vector"], "norm": BiasRMS(), "scale": vector_scale, "constrained": False, "init": False}
        )
    return [g for g in groups if g["params"]]
