"""Muon: momentum, then Newton-Schulz orthogonalisation, for hidden weight matrices
(Jordan's Muon blog, kellerjordan.github.io/posts/muon; Moonlight, arXiv 2502.16982).

Per matrix parameter W [d_out, d_in] (conv filters are flattened to [out, in·k·k]; in a group
with ``batched=True`` a ≥3-D weight [..., d_out, d_in], e.g. MoE experts [E, out, in], is a
batch of matrices, each orthogonalised on its own) with gradient G, all math in fp32:

    M <- μ·M + G                           momentum, sum form (Moonlight, Dion)
    U = G + μ·M  (Nesterov)  or  U = M
    O = NS(U)                              optim.newton_schulz, ``ns_steps`` steps
    W <- W·(1 - η·λ)                       decoupled weight decay with the base lr
    W <- W - η·s·O                         s = shape scale, see SHAPE_SCALES

``torch.optim.Muon`` uses the EMA form M <- βM + (1-β)G; its U is (1-β) times ours and
NS divides the scale away, so the updates agree (optim/tests/test_muon.py in the scalelab
repository).

Param groups with ``use_muon=False`` are stepped by AdamW's math (``optim.adamw.adamw_step_group_``,
group keys lr, betas, eps, weight_decay; their state ``step``, ``exp_avg``, ``exp_avg_sq`` sits in
this optimizer's own ``state``, with no nested optimizer), so one optimizer (and one LR
scheduler) holds a whole model;
``optim.routing.muon_param_groups`` builds such groups by parameter name.

``foreach=True`` (the default) runs the momentum update and Nesterov blend as
``torch._foreach_*`` ops over the Muon params of a group, by (device, dtype) and in chunks
(``muon_momentum_``; on CPU bitwise the per-parameter loop, ``foreach=False``); the AdamW
groups get the same setting (``optim.AdamW``'s foreach path). Newton-Schulz and the weight
update stay per matrix (NS batches the matrices itself, ``optim.distributed``). Eager on the
CPU in one process, each Muon param goes through momentum, NS and update before the next
(``Muon._one_at_a_time``; foreach then spans one tensor): one U alive at a time. The step count
is read on the host only for stochastic rounding (its key), once per ``step()`` call.

Distributed (after Dion, arXiv 2504.05295): ``distributed_mode="ddp"`` splits the NS work
over the ranks of replicated params (``optim.distributed.ddp_matrix_apply``), ``"fsdp"`` sends FSDP2
Shard(0) row shards to an owner rank (``fsdp_matrix_apply``); "auto" picks "fsdp" when a
Muon param is a DTensor and "none" otherwise (DDP is never assumed: ask for it).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from optim import _validate
from optim._hyper import as_tensor, is_compiling, tensorize_group_
from optim._param_io import (
    advance_steps_,
    foreach_chunks,
    local,
    params_with_grads,
    restore_fp32_state,
    write_param_,
)
from optim._settings_state import SettingsState
from optim._validate import (
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
    dtype_name,
    repr_with_settings,
)
from optim.adamw import adamw_init_state_, adamw_step_group_, check_adamw_group
from optim.coefficients import Coefficients, resolve
from optim.distributed import (
    ddp_matrix_apply,
    fsdp_matrix_apply,
    is_dtensor,
    local_matrix_apply,
)
from optim.muon_update import SHAPE_SCALES, is_batched, muon_momentum_, piece_shape, row_blocks, shape_scale
from optim.newton_schulz import BACKENDS, newton_schulz
from optim.workspace import Workspace

__all__ = ["SHAPE_SCALES", "Muon", "muon_momentum_", "shape_scale"]

MODES = ("auto", "none", "ddp", "fsdp")
def _ns_chunks(mats: list[Tensor]) -> list[list[int]]:
    """Indices of ``mats`` by (shape, dtype, device), in order: on a GPU one stack per kind
    (a batched call), on the CPU one matrix per call. There Newton-Schulz runs 2-D GEMMs on
    each matrix anyway (``optim.newton_schulz``), so a stack only adds a copy in and out of
    it. Each matrix's NS result does not depend on what it is stacked with."""
    by_kind: dict[tuple, list[int]] = {}
    for i, x in enumerate(mats):
        by_kind.setdefault((tuple(x.shape), x.dtype, x.device), []).append(i)
    chunks = []
    for idx in by_kind.values():
        per = 1 if mats[idx[0]].device.type == "cpu" else len(idx)
        chunks += [idx[k : k + per] for k in range(0, len(idx), per)]
    return chunks


_SR_ID_BASE = 1 << 32  # SR param ids of Muon params; the AdamW groups number theirs from 0


def _check_settings(ns_dtype, ns_backend, stochastic_rounding, seed, distributed_mode, foreach) -> None:
    """Muon's optimizer-level arguments (not group keys), each with a ValueError naming it."""
    if not isinstance(ns_dtype, torch.dtype) or not ns_dtype.is_floating_point:
        raise ValueError(f"Muon: ns_dtype must be a floating torch.dtype (e.g. torch.bfloat16), got {ns_dtype!r}")
    check_choice("Muon", "ns_backend", ns_backend, BACKENDS)
    if ns_backend == "triton" and not _validate.triton_available():  # looked up now: tests patch it
        raise ValueError("Muon: ns_backend='triton' needs the triton package, which is not importable "
                         "(pip install 'scalelab-optim[triton]', or use ns_backend='auto')")
    check_bool("Muon", "stochastic_rounding", stochastic_rounding)
    check_int("Muon", "seed", seed, 0)
    check_choice("Muon", "distributed_mode", distributed_mode, MODES)
    if foreach is not None:
        check_bool("Muon", "foreach", foreach)


def _per_block(fn, k: int):
    """``fn`` on each of ``k`` equal row blocks of every matrix of a stack [B, m, n]: the
    blocks are a stack [B·k, m/k, n] (what the single-process path makes of ``blocks=k``)."""

    def apply(x: Tensor) -> Tensor:
        b, m, n = x.shape
        return fn(x.reshape(b * k, m // k, n)).reshape(b, m, n)

    return apply


class Muon(SettingsState, torch.optim.Optimizer):
    """Muon for matrix params, optionally AdamW for ``use_muon=False`` groups (module docstring).

    Args:
        params: params or param-group dicts; a group may set ``use_muon=False`` and any key below,
            and ``blocks=k``: orthogonalise each of k equal row blocks apart, with its own shape
            scale (fused [W_Q; W_K; W_V] weights, ``optim.fused_qkv``; under FSDP2 the owner rank of
            the gathered matrix splits it, ``optim.distributed.fsdp_matrix_apply``);
            and ``batched=True``: a ≥3-D weight [..., d_out, d_in] (MoE experts [E, out, in]) is
            a batch of [d_out, d_in] matrices, each orthogonalised and shape-scaled on its own (one
            batched Newton-Schulz call), instead of flattened to [d_out, d_in·k·k] like a conv
            filter (the default, False; not for FSDP-sharded params).
        lr: η >= 0 (float or 0-D tensor); each group holds it as a 0-D float64 tensor that LR
            schedulers fill in place: no torch.compile recompile on change (``optim._hyper``).
        momentum: μ in [0, 1) (float or 0-D tensor).
        weight_decay: λ >= 0, decoupled, multiplied by the base lr (float or 0-D tensor).
        nesterov: U = G + μM instead of M.
        ns_steps, coefficients: the Newton-Schulz schedule (``optim.coefficients``): an int >= 1
            and a preset name or triples that ``optim.coefficients.resolve`` accepts for it.
        shape_scale: one of SHAPE_SCALES.
        betas, eps: AdamW moments and epsilon of the ``use_muon=False`` groups.
        ns_dtype: floating dtype of the NS iteration (bf16 by default, as every reference; fp32
            for tests).
        ns_backend: ``optim.newton_schulz`` backend ("auto": Triton on large CUDA matrices;
            "triton" is refused at construction when triton is not importable).
        stochastic_rounding: write bf16 params with ``optim.stochastic_round_`` (else nearest).
        seed: SR seed; the same on every rank.
        distributed_mode: "auto" | "none" | "ddp" | "fsdp".
        process_group: group for "ddp" (default: the world) and "fsdp" (default: the mesh's).
        foreach: multi-tensor momentum (and AdamW groups), or the per-parameter loop (False, the
            reference); bitwise equal on CPU. None (default) means True, as for ``optim.AdamW``.
    Defaults are KellerJordan/Muon's (lr 0.02, μ 0.95, Nesterov, wd 0, 5 Jordan steps;
    aux AdamW (0.9, 0.95), eps 1e-10).

    Every argument and group key is checked at construction (ValueError naming it, the value
    and what is allowed). Muon groups refuse complex params (as ``torch.optim.Muon``); the
    ``use_muon=False`` groups step complex params as ``torch.optim.AdamW`` does. Sparse gradients
    raise torch's RuntimeError. State is created lazily, at the first step where a param has a
    grad (as ``torch.optim``): frozen params cost nothing. ``state_dict()["settings"]`` records
    ns_dtype (as a string), ns_backend, stochastic_rounding, seed, distributed_mode (resolved)
    and foreach; ``load_state_dict`` refuses a state_dict whose settings differ, or whose groups
    lack Muon's keys (e.g. a ``torch.optim.Muon`` one), and warns on one with no settings.
    """

    _SETTINGS = ("ns_dtype", "ns_backend", "stochastic_rounding", "seed", "process_group", "foreach",
                 "distributed_mode")
    _SHARED = ("process_group",)

    def __init__(
        self,
        params,
        lr: float | Tensor = 0.02,
        momentum: float | Tensor = 0.95,
        weight_decay: float | Tensor = 0.0,
        *,
        nesterov: bool = True,
        ns_steps: int = 5,
        coefficients: Coefficients = "jordan",
        shape_scale: str = "jordan",
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-10,
        ns_dtype: torch.dtype = torch.bfloat16,
        ns_backend: str = "auto",
        stochastic_rounding: bool = False,
        seed: int = 0,
        distributed_mode: str = "auto",
        process_group=None,
        foreach: bool | None = None,
    ):
        _check_settings(ns_dtype, ns_backend, stochastic_rounding, seed, distributed_mode, foreach)
        defaults = {
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov,
            "ns_steps": ns_steps, "coefficients": coefficients, "shape_scale": shape_scale,
            "betas": betas, "eps": eps, "use_muon": True,
        }
        super().__init__(params, defaults)
        self.ns_dtype = ns_dtype
        self.ns_backend = ns_backend
        self.stochastic_rounding = stochastic_rounding
        self.seed = seed
        self.process_group = process_group
        self.foreach = True if foreach is None else foreach
        self._new_scratch()  # the CPU path's workspace (``optim.workspace``), never saved or copied
        for group in self.param_groups:
            self._check_group(group)
            tensorize_group_(group, self.defaults)
        muon_params = [p for g in self.param_groups if g["use_muon"] for p in g["params"]]
        sharded = any(is_dtensor(p) and not all(pl.is_replicate() for pl in p.placements) for p in muon_params)
        self.distributed_mode = distributed_mode
        if distributed_mode == "auto":
            self.distributed_mode = "fsdp" if sharded else "none"
        elif sharded and distributed_mode != "fsdp":
            raise ValueError(
                f"Muon: sharded DTensor params need distributed_mode='fsdp' (or 'auto'), got {distributed_mode!r}"
            )

    def _check_group(self, group: dict) -> None:
        """Every key of a group (``optim._validate``), and its params against them."""
        check_bool("Muon", "use_muon", group["use_muon"])
        check_adamw_group("Muon", group)  # lr, wd >= 0 and the AdamW keys (betas, eps) of every group
        if not group["use_muon"]:
            return
        check_range("Muon", "momentum", group["momentum"], 0.0, 1.0, hi_open=True)
        check_bool("Muon", "nesterov", group["nesterov"])
        check_int("Muon", "ns_steps", group["ns_steps"], 1)
        try:
            resolve(group["coefficients"], group["ns_steps"])
        except (ValueError, TypeError) as e:
            raise ValueError(f"Muon: coefficients={group['coefficients']!r} refused: {e}") from None
        check_choice("Muon", "shape_scale", group["shape_scale"], SHAPE_SCALES)
        check_int("Muon", "blocks", group.get("blocks", 1), 1)
        check_bool("Muon", "batched", group.get("batched", False))
        check_real_params("Muon", group["params"], "Muon's orthogonalised updates (use_muon=True)")
        blocks = row_blocks(group)
        for p in group["params"]:
            if is_batched(group) and is_dtensor(p):
                raise ValueError(
                    f"Muon: batched=True needs plain tensors, got a DTensor of shape {tuple(p.shape)}; "
                    "shard the experts' weights as separate matrices, or keep them unsharded"
                )
            if p.ndim < 2:
                raise ValueError(
                    f"Muon: a {p.ndim}-D param of shape {tuple(p.shape)} is in a Muon group; "
                    "put vectors, embeddings and the head in a group with use_muon=False "
                    "(optim.routing.muon_param_groups does this by name)"
                )
            rows = p.shape[-2] if is_batched(group) else p.shape[0]
            if rows % blocks:
                raise ValueError(
                    f"Muon: blocks={blocks} needs matrices whose {rows} rows "
                    f"split into {blocks} (shape {tuple(p.shape)})"
                )

    def settings(self) -> dict[str, str | int | bool]:
        """The result-changing settings that are not param-group keys (saved in ``state_dict``)."""
        return {
            "ns_dtype": dtype_name(self.ns_dtype), "ns_backend": self.ns_backend,
            "stochastic_rounding": self.stochastic_rounding, "seed": self.seed,
            "distributed_mode": self.distributed_mode, "foreach": self.foreach,
        }  # fmt: skip

    def __repr__(self) -> str:
        return repr_with_settings(super().__repr__(), self.settings())

    def state_dict(self) -> dict:
        """torch's, plus ``"settings"`` (``settings()``, plain values: weights_only-safe)."""
        return {**super().state_dict(), SETTINGS_KEY: self.settings()}

    def _init_state(self, p: Tensor) -> None:
        st = self.state[p]
        if not st:
            st["step"] = torch.tensor(0.0, dtype=torch.float32)
            st["momentum_buffer"] = torch.zeros_like(p, dtype=torch.float32, memory_format=torch.preserve_format)

    def add_param_group(self, param_group: dict) -> None:
        if isinstance(param_group, dict):  # Muon's own keys, blocks and batched (a typo is refused)
            check_group_keys("Muon", param_group, [*self.defaults, "blocks", "batched"])
        super().add_param_group(param_group)
        if hasattr(self, "ns_dtype"):  # not from Optimizer.__init__ (__init__ checks those groups)
            self._check_group(self.param_groups[-1])
            tensorize_group_(self.param_groups[-1], self.defaults)

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, after refusing a foreign state_dict or different settings; fp32 state kept."""
        check_saved_groups("Muon", state_dict, self.defaults)
        check_saved_settings("Muon", state_dict, self.settings())
        super().load_state_dict(state_dict)
        restore_fp32_state(self, state_dict)  # keep fp32 momentum/moments of bf16 params

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_dense_grads("Muon", self.param_groups)
        # the use_muon=False groups: AdamW's per-group math on this optimizer's own state (no
        # nested optimizer: torch.compile then sees one Optimizer and one state dict); SR ids
        # count from 0 over those groups, Muon's from _SR_ID_BASE (as before: the same bits)
        aux = params_with_grads([g for g in self.param_groups if not g["use_muon"]])
        work = params_with_grads([g for g in self.param_groups if g["use_muon"]], first_id=_SR_ID_BASE)
        aux_live = [p for _, ps, _ in aux for p in ps]
        live = [p for _, ps, _ in work for p in ps]
        for p in aux_live:
            adamw_init_state_(self.state[p], p, master_weights=False)
        for p in live:
            self._init_state(p)
        steps = [self.state[p]["step"] for p in aux_live + live]
        counts = advance_steps_(steps, foreach=self.foreach, sr=self.stochastic_rounding)  # None without SR
        aux_sr = None if counts is None else iter(counts[: len(aux_live)])
        for group, ps, ids in aux:
            adamw_step_group_(
                self.state, group, ps, ids, None if aux_sr is None else [next(aux_sr) for _ in ps],
                foreach=self.foreach, stochastic_rounding=self.stochastic_rounding, seed=self.seed,
            )  # fmt: skip
        sr_steps = iter([0] * len(live) if counts is None else counts[len(aux_live) :])
        if self._one_at_a_time(live):  # momentum, NS and update of one matrix before the next
            ws = self._workspace
            for group, ps, ids in work:
                ns, ns_ws = self._ns_fn(group), self._ns_fn(group, ws)
                for p, pid in zip(ps, ids):
                    (u,) = self._momentum(group, [p], ws)
                    pieces = u.reshape(piece_shape(group, tuple(u.shape))).unbind(0)
                    if len(pieces) == 1:  # the result lives in the workspace until the next matrix
                        o = ns_ws(pieces[0][None])[0]
                        if group["nesterov"] and o.dtype != u.dtype and (
                                not o.is_contiguous() or not torch.is_tensor(group["lr"])):
                            # _apply's add would upcast O into a fresh tensor (a float lr's
                            # add_(alpha=), or a tall matrix's transposed O): upcast into U's
                            # buffer instead, free again (the same bits). A tensor lr's
                            # addcmul_ reads a contiguous bf16 O as it is, with no copy.
                            o = u.view_as(o).copy_(o)
                    else:  # pieces of one shape would share the workspace's buffers
                        o = torch.stack([ns(b[None])[0] for b in pieces])
                    self._apply(p, group, o, pid, next(sr_steps))
            return loss
        # momentum and U per Muon param, grouped by NS schedule (one distributed call each)
        jobs: dict[tuple, list[tuple[Tensor, dict, Tensor, int, int]]] = {}
        for group, ps, ids in work:
            key = (group["ns_steps"], repr(group["coefficients"]))
            for p, u, pid in zip(ps, self._momentum(group, ps), ids):
                if is_dtensor(p):  # local rows: the owner rank splits the gathered matrix (_orthogonalise)
                    pieces = u.reshape(1, u.shape[0], math.prod(u.shape[1:]))  # (an empty shard too)
                else:
                    pieces = u.reshape(piece_shape(group, tuple(u.shape)))  # [count, rows, cols]
                jobs.setdefault(key, []).append((p, group, pieces, pid, next(sr_steps)))
        for items in jobs.values():
            ns = self._ns_fn(items[0][1])
            pairs = [(p, b) for p, _, pieces, *_ in items for b in pieces.unbind(0)]
            blocks = [row_blocks(g) if is_dtensor(p) else 1
                      for p, g, pieces, *_ in items for _ in range(pieces.shape[0])]
            updates = iter(self._orthogonalise(pairs, ns, blocks))
            for p, _group, pieces, pid, sr_step in items:  # pieces back together (one: no copy)
                done = [next(updates) for _ in range(pieces.shape[0])]
                o = done[0] if len(done) == 1 else torch.stack(done)
                self._apply(p, _group, o, pid, sr_step)
        return loss

    def _new_scratch(self) -> None:
        self._workspace = Workspace()

    def _one_at_a_time(self, live: list[Tensor]) -> bool:
        """Whether ``step`` takes the Muon params one by one through momentum, NS and update:
        eager, on the CPU, in one process, with plain tensors. There NS runs per matrix anyway
        (``_ns_chunks``), and one U at a time is what the allocator can reuse: all U made first
        (as the batched path must, to stack or send them) hold every matrix's fp32 copy at
        once, which the allocator returns to the system after each step and the next step
        takes again page by page: 19,000 minor page faults per step where torch.optim.Muon
        takes 6,800, and 8,600 one at a time (the matrices of bench/optim_step.py in the
        scalelab repository at d_model 512, 4 layers; the system time they cost fell from ~39
        to ~16 ms per step, torch's ~17)."""
        return (self.distributed_mode == "none" and not is_compiling()
                and all(p.device.type == "cpu" and not is_dtensor(p) for p in live))

    def _ns_fn(self, group: dict, ws: Workspace | None = None):
        """The group's Newton-Schulz, [B, m, n] -> [B, m, n] in the NS dtype (``_apply`` upcasts
        as it adds); with ``ws``, every buffer from the workspace (the result too)."""
        steps, coeffs = group["ns_steps"], group["coefficients"]
        scratch = bool(group["nesterov"])  # U = G + μM is scratch (without Nesterov U is M itself)

        def ns(x: Tensor) -> Tensor:
            return newton_schulz(x, steps, coeffs, dtype=self.ns_dtype, backend=self.ns_backend,
                                 out_dtype=self.ns_dtype, overwrite=scratch, workspace=ws)

        return ns

    def _momentum(self, group: dict, ps: list[Tensor], ws: Workspace | None = None) -> list[Tensor]:
        """U of each param (``muon_momentum_``), by foreach chunk or param by param; with
        ``ws`` (one param), a Nesterov U is written into the workspace."""
        us: dict[int, Tensor] = {}
        bufs = [local(self.state[p]["momentum_buffer"]) for p in ps]  # [rows, ...] fp32
        chunks = foreach_chunks(bufs) if self.foreach else [[i] for i in range(len(ps))]
        for idx in chunks:
            grads = [local(ps[i].grad).to(torch.float32) for i in idx]
            mu = as_tensor(group["momentum"]) if is_compiling() else group["momentum"]
            outs = None
            if ws is not None and group["nesterov"]:
                outs = [ws.get("muon.u", tuple(bufs[i].shape), torch.float32, bufs[i].device) for i in idx]
            out = muon_momentum_([bufs[i] for i in idx], grads, mu, nesterov=group["nesterov"],
                                 foreach=self.foreach, outs=outs)
            us.update(zip(idx, out))
        return [us[i] for i in range(len(ps))]

    def _orthogonalise(self, pairs: list[tuple[Tensor, Tensor]], ns, blocks: list[int]) -> list[Tensor]:
        """NS of every U (local rows under FSDP), spread over the ranks by distributed_mode.

        ``blocks``: per pair, the row blocks the owner rank orthogonalises apart after it gathers
        a sharded matrix (a fused QKV with ``blocks=3``: ``_per_block``); 1 for every plain
        matrix, whose blocks are separate pairs already."""
        mats = [u for _, u in pairs]
        if self.distributed_mode == "ddp":
            return ddp_matrix_apply(mats, ns, group=self.process_group)
        if self.distributed_mode == "none":
            done: list[Tensor | None] = [None] * len(mats)
            for idx in _ns_chunks(mats):
                for i, o in zip(idx, local_matrix_apply([mats[i] for i in idx], ns)):
                    done[i] = o
            return done  # type: ignore[return-value]
        out: list[Tensor | None] = [None] * len(pairs)
        sharded = [i for i, (p, _) in enumerate(pairs) if is_dtensor(p)]
        plain = [i for i, (p, _) in enumerate(pairs) if not is_dtensor(p)]  # replicated: local
        for i, o in zip(plain, local_matrix_apply([mats[i] for i in plain], ns)):
            out[i] = o
        group = self.process_group
        if sharded and group is None:
            group = pairs[sharded[0]][0].device_mesh.get_group()
        for k in sorted({blocks[i] for i in sharded}):  # one all_to_all round per block count
            idx = [i for i in sharded if blocks[i] == k]
            shapes = [(pairs[i][0].shape[0], math.prod(pairs[i][0].shape[1:])) for i in idx]
            fn = ns if k == 1 else _per_block(ns, k)
            for i, o in zip(idx, fsdp_matrix_apply([mats[i] for i in idx], fn, global_shapes=shapes, group=group)):
                out[i] = o
        return out  # type: ignore[return-value]

    def _apply(self, p: Tensor, group: dict, o: Tensor, pid: int, sr_step: int) -> None:
        """W <- W(1 - ηλ) - η·s·O on the local rows, written back in p's dtype (``sr_step``:
        the step count keying stochastic rounding, 0 when SR is off)."""
        lr, wd = group["lr"], group["weight_decay"]
        _, rows, cols = piece_shape(group, tuple(p.shape))
        s = shape_scale(group["shape_scale"], rows, cols)
        w = local(p)
        if w.dtype != torch.float32:
            w = w.to(torch.float32)
        if is_compiling():  # numbers as tensors, no branch on them (optim._hyper)
            lr, wd = as_tensor(lr), as_tensor(wd)
            w.mul_(1 - lr * wd)
        elif torch.is_tensor(wd) or wd != 0:  # w·1 is exact: skipped
            w.mul_(1 - lr * wd)
        if torch.is_tensor(lr):  # O in the NS dtype, upcast inside the one pass
            w.addcmul_(o.view_as(w), lr * -s)
        else:  # a number (a trainer's own float): the same bits as addcmul_
            w.add_(o.view_as(w), alpha=lr * -s)
        sr = self.stochastic_rounding and local(p).dtype == torch.bfloat16
        write_param_(p, w, stochastic_rounding=sr, seed=self.seed, step=sr_step if sr else 0, param_id=pid)
