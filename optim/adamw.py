"""AdamW with fp32 math for low-precision params: stochastic rounding or fp32 master weights.

Update (Loshchilov & Hutter 2019, arXiv 1711.05101; the op order of ``torch.optim.AdamW``,
single-tensor path), per parameter p with fp32 working copy w, gradient g (upcast to fp32),
step t:

    w ← w·(1 - η·λ)
    m ← lerp(m, g, 1 - β1);   v ← β2·v + (1 - β2)·g²
    w ← w - (η / (1 - β1^t)) · m / (sqrt(v) / sqrt(1 - β2^t) + eps)

m and v are fp32 whatever the param dtype (``torch.optim.AdamW`` keeps them in the
param dtype: late plateaus in bf16), or with ``moment_dtype=torch.bfloat16`` bf16 written by
stochastic rounding from the fp32 update (half the state; ``_store_moments_``). How w is stored back:

- fp32 params: in place, identical to ``torch.optim.AdamW``.
- bf16, ``stochastic_rounding=True`` (pytorch/ao's SR-AdamW recipe): w = p
  upcast; p ← SR(w) keyed by (seed, step, param index, global element index), so DDP
  replicas and FSDP shards round identically (``optim.stochastic_round_``).
- bf16, ``master_weights=True``: the exact alternative. We keep an **fp32 master copy**
  (state ``master``, 4 bytes/param) rather than the 2-byte mantissa buffer: it is
  exact, survives any param dtype, and shards like the param under FSDP2; the bf16
  param is the nearest rounding of the master after every step.
- bf16 with neither: p ← nearest(w). Small updates cancel (the baseline SR fixes).

No host read of the step: t stays a 0-d CPU tensor (as in ``torch.optim`` when not
capturable), and the bias corrections and step sizes are float64 tensor math that reproduces,
bit for bit, the Python float math of a host-scalar t (``bias_corrections``, ``step_sizes``;
torch.optim.AdamW's capturable path computes them as tensors too, in fp32). On CPU
each step writes exactly the bits of the former host-scalar implementation
(optim/tests/test_foreach.py in the scalelab repository); ``_descend_`` says where CUDA may differ in the last bit. Only
stochastic rounding reads the step counts on the host (its counter-hash key is an integer): once
per ``step()`` call, ``optim._param_io.host_steps``.

``foreach=True`` (the default) runs the elementwise math as ``torch._foreach_*`` ops over the
params of a group, by (device, dtype) and in chunks (``optim._param_io.foreach_chunks``;
``adamw_update_``): fused multi-tensor kernels on CUDA, a C++ loop of the per-tensor kernels on
CPU. The division by the per-parameter sqrt(1 - β2^t) runs tensor by tensor even so (the fused
form takes Python numbers only). ``foreach=False`` is the per-parameter loop, the reference,
which holds fp32 temporaries for one param at a time; on CPU the two are bitwise equal.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._hyper import as_tensor, is_compiling, tensorize_group_
from ._param_io import (
    advance_steps_,
    foreach_chunks,
    global_index,
    local,
    params_with_grads,
    real,
    restore_fp32_state,
    write_params_,
)
from ._settings_state import SettingsState
from ._validate import (
    SETTINGS_KEY,
    check_bool,
    check_dense_grads,
    check_group_keys,
    check_int,
    check_range,
    check_saved_groups,
    check_saved_settings,
    dtype_name,
    repr_with_settings,
)
from .stochastic_rounding import stochastic_round_

__all__ = [
    "MOMENT_DTYPES", "AdamW", "moment_sr_id", "adamw_init_state_", "adamw_step_group_", "adamw_update_",
    "bias_corrections", "check_adamw_group", "step_sizes",
]


def check_adamw_group(owner: str, group: dict) -> None:
    """lr, eps, weight_decay >= 0 and betas in [0, 1) (torch.optim.AdamW's rules), else a
    ValueError naming ``owner`` and the key."""
    check_range(owner, "lr", group["lr"], 0.0)
    betas = group["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{owner}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        check_range(owner, f"betas[{i}]", b, 0.0, 1.0, hi_open=True)
    check_range(owner, "eps", group["eps"], 0.0)
    check_range(owner, "weight_decay", group["weight_decay"], 0.0)


def bias_corrections(steps: list[Tensor], beta1: float, beta2: float) -> tuple[Tensor, Tensor]:
    """(1 - β1^t, sqrt(1 - β2^t)) as float64 CPU tensors [n], for the n 0-d step tensors t,
    without reading t on the host.

    Bit for bit Python's ``1 - beta1**t`` and ``(1 - beta2**t) ** 0.5`` on the host scalar t:
    each power is a 0-d ``pow`` (torch evaluates a single element with the C library's pow, as
    Python does; a batched pow is vectorised (SLEEF) and can differ in the last bit), and the
    square root is pow(x, 0.5) with a tensor exponent (a Python 0.5 exponent dispatches to
    sqrt, which libm's pow(x, 0.5) does not always equal). Subtraction is IEEE-exact either way.
    Steps kept on another device are copied to the CPU (a sync; optim keeps them on the CPU).
    """
    if torch.is_tensor(beta1):  # traced code (optim._hyper): tensor math, one graph input each
        t = torch.stack(steps).to(device="cpu", dtype=torch.float64)
        return 1 - beta1**t, (1 - beta2**t).sqrt()
    t = torch.stack(steps).to(device="cpu", dtype=torch.float64).unbind()  # n × 0-d
    bc1 = 1 - torch.stack(torch._foreach_pow(beta1, t))  # [n]
    rest2 = (1 - torch.stack(torch._foreach_pow(beta2, t))).unbind()  # n × 0-d
    half = torch.full((), 0.5, dtype=torch.float64)
    return bc1, torch.stack(torch._foreach_pow(rest2, [half] * len(t)))


def step_sizes(lr: float | Tensor, bc1: Tensor) -> Tensor:
    """η / (1 - β1^t) [n]: float64 on the CPU for a float η (Python's double division), else in
    η's dtype and device (as ``lr / bias_correction1`` rounds the correction to η's dtype)."""
    if torch.is_tensor(lr):
        return lr / bc1.to(device=lr.device, dtype=lr.dtype)
    return torch.full_like(bc1, lr) / bc1  # not ``lr / bc1``: Tensor.__rtruediv__ is reciprocal·lr


def adamw_update_(
    ws: list[Tensor],
    ms: list[Tensor],
    vs: list[Tensor],
    gs: list[Tensor],
    sizes: Tensor,
    bc2_sqrt: Tensor,
    *,
    decay: float | Tensor | None,
    beta1: float,
    beta2: float,
    eps: float,
    foreach: bool,
) -> None:
    """One AdamW update in place on fp32 weights ``ws`` and moments ``ms``, ``vs`` (module
    docstring), from fp32 grads ``gs``.

    sizes: η/(1 - β1^t) [n] (``step_sizes``); bc2_sqrt: sqrt(1 - β2^t) [n] (``bias_corrections``).
    decay: the weight-decay factor 1 - η·λ, or None for λ = 0 (w·1 is exact: skipped).
    foreach: ``torch._foreach_*`` ops (all tensors on one device), else a per-tensor loop.

    The last op, w ← w - (η_t·m)/d, is ``_descend_`` on both paths. Tensor betas (traced code,
    ``optim._hyper``) take ``_update_tensor_betas_``.
    """
    if torch.is_tensor(beta1):
        _update_tensor_betas_(ws, ms, vs, gs, sizes, bc2_sqrt, decay=decay, beta1=beta1, beta2=beta2, eps=eps)
        return
    if foreach:
        if decay is not None:
            torch._foreach_mul_(ws, decay)
        torch._foreach_lerp_(ms, gs, 1 - beta1)
        torch._foreach_mul_(vs, beta2)
        torch._foreach_addcmul_(vs, gs, gs, value=1 - beta2)
        denoms = torch._foreach_sqrt(vs)
        torch._foreach_div_(denoms, bc2_sqrt.unbind())
        torch._foreach_add_(denoms, eps)
        _descend_(ws, ms, denoms, sizes)
        return
    for i, (w, m, v, g, b2) in enumerate(zip(ws, ms, vs, gs, bc2_sqrt.unbind())):
        if decay is not None:
            w.mul_(decay)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = v.sqrt().div_(b2).add_(eps)
        _descend_([w], [m], [denom], sizes[i : i + 1])


def _update_tensor_betas_(ws, ms, vs, gs, sizes, bc2_sqrt, *, decay, beta1: Tensor, beta2: Tensor, eps) -> None:
    """``adamw_update_`` with 0-d tensor β1, β2 (and decay), tensor by tensor: foreach lerp
    and addcmul take their weights as Python numbers only. Traced code (Inductor fuses it);
    the order of operations is the float path's."""
    denoms = []
    for i, (w, m, v, g) in enumerate(zip(ws, ms, vs, gs)):
        if decay is not None:
            w.mul_(decay)
        m.lerp_(g, (1 - beta1).to(m.dtype))
        v.mul_(beta2).addcmul_(g, g * (1 - beta2))
        denoms.append(v.sqrt().div_(bc2_sqrt[i]))
    torch._foreach_add_(denoms, eps)  # eps a constant: a foreach scalar (``add_`` would restart Dynamo's analysis)
    _descend_(ws, ms, denoms, sizes)


def _descend_(ws: list[Tensor], ms: list[Tensor], denoms: list[Tensor], sizes: Tensor) -> None:
    """w ← w - (η_t·m)/d for each tensor; sizes: the η_t [n].

    ``addcdiv_`` takes its scalar as a Python number (a host read of a tensor step);
    ``_foreach_addcdiv_`` also takes a CPU tensor of scalars, which eager code uses: one pass.
    torch's fake tensors reject that overload, so traced code (torch.compile), and step sizes
    on a device (a CUDA tensor η), scale m first, w ← w + (-1)·(η_t·m)/d: a pass more, which
    Inductor fuses. torch's CPU addcdiv computes (s·m)/d, so both forms give the bits of the
    former host-scalar step; its CUDA kernels compute s·(m/d), which the first form matches (as
    the former step did for a float η) and the second can miss by an ulp (so can the traced fma,
    optim/tests/test_compile.py in the scalelab repository).
    """
    if sizes.device.type == "cpu" and not torch.compiler.is_compiling():
        torch._foreach_addcdiv_(ws, ms, denoms, -sizes)
    else:
        torch._foreach_addcdiv_(ws, torch._foreach_mul(ms, sizes.unbind()), denoms, value=-1.0)


def adamw_init_state_(st: dict, p: Tensor, *, master_weights: bool, moment_dtype: torch.dtype = torch.float32) -> None:
    """AdamW's state of param ``p`` in its (empty) state dict ``st``, unless already there:
    a 0-d fp32 CPU ``step``, ``exp_avg`` / ``exp_avg_sq`` in ``moment_dtype`` (fp32, or bf16:
    ``MOMENT_DTYPES``) of the real view of a complex p, and with ``master_weights`` an fp32
    ``master`` copy of a non-fp32 p."""
    if st:
        return
    w = real(p)
    st["step"] = torch.tensor(0.0, dtype=torch.float32)
    st["exp_avg"] = torch.zeros_like(w, dtype=moment_dtype, memory_format=torch.preserve_format)
    st["exp_avg_sq"] = torch.zeros_like(w, dtype=moment_dtype, memory_format=torch.preserve_format)
    if master_weights and w.dtype != torch.float32:
        st["master"] = w.detach().to(torch.float32).clone()


def _weight(st: dict, p: Tensor) -> Tensor:
    """The fp32 working copy w of p: its master, p itself (fp32; a complex64 p's real view),
    or p upcast."""
    if "master" in st:
        return local(st["master"])
    w = real(local(p))
    return w if w.dtype == torch.float32 else w.to(torch.float32)


def adamw_step_group_(
    state: dict,
    group: dict,
    ps: list[Tensor],
    ids: list[int],
    sr_steps: list[int] | None,
    *,
    foreach: bool,
    stochastic_rounding: bool,
    seed: int,
) -> None:
    """The AdamW update of one param group's params with grads ``ps`` (their state in
    ``state[p]``, already advanced to this step), chunk by chunk (foreach) or param by param
    (the loop), each written back as it is done. ``ids``: their SR param ids; ``sr_steps``: the
    SR step counts (None without stochastic rounding and bf16 moments).

    bf16 moments (state ``exp_avg`` in bf16, ``optim.AdamW(moment_dtype=torch.bfloat16)``): the
    update runs on fp32 copies, which are written back with ``optim.stochastic_round_`` keyed
    by ``moment_sr_id`` (``_store_moments_``).

    A plain function of (state, group), not a method, so that ``optim.Muon`` steps its
    ``use_muon=False`` groups with it on its own ``state`` and no nested optimizer (a second
    ``torch.optim.Optimizer`` sharing that state made torch.compile guard on grads through it).
    """
    lr, wd, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
    if is_compiling():  # every number a tensor: a changed float is a graph input (optim._hyper)
        lr, wd, beta1, beta2 = (as_tensor(x) for x in (lr, wd, beta1, beta2))
        decay = 1 - lr * wd  # w·1 is exact: no data-dependent branch in the graph
    else:
        if torch.is_tensor(lr) and lr.device.type == "cpu" and ps[0].device.type != "cpu":
            # a CPU lr for device params: its value, as torch.optim's foreach path does
            # (``_to_scalar``; a CPU read, no device sync), so the device's fused foreach
            # kernels get Python scalars (a CPU tensor scalar sends them to a per-tensor loop)
            lr = lr.item()
        decay = None if not torch.is_tensor(wd) and wd == 0 else 1 - lr * wd
    states = [state[p] for p in ps]
    bc1, bc2_sqrt = bias_corrections([st["step"] for st in states], beta1, beta2)
    sizes = step_sizes(lr, bc1)
    chunks = foreach_chunks([real(local(p)) for p in ps]) if foreach else [[i] for i in range(len(ps))]
    for idx in chunks:
        ws = [_weight(states[i], ps[i]) for i in idx]
        ms = [local(states[i]["exp_avg"]) for i in idx]
        vs = [local(states[i]["exp_avg_sq"]) for i in idx]
        low = ms[0].dtype != torch.float32  # bf16 moments: fp32 copies, SR-written below
        ms32 = [m.to(torch.float32) for m in ms] if low else ms
        vs32 = [v.to(torch.float32) for v in vs] if low else vs
        adamw_update_(
            ws,
            ms32,
            vs32,
            [real(local(ps[i].grad)).to(torch.float32) for i in idx],
            sizes[idx],
            bc2_sqrt[idx],
            decay=decay, beta1=beta1, beta2=beta2, eps=group["eps"], foreach=foreach,
        )  # fmt: skip
        if low:
            _store_moments_([ps[i] for i in idx], ms, vs, ms32, vs32, [sr_steps[i] for i in idx],
                            [ids[i] for i in idx], seed=seed)
        write_params_(
            [ps[i] for i in idx], ws, stochastic_rounding=stochastic_rounding, seed=seed,
            steps=None if sr_steps is None else [sr_steps[i] for i in idx],
            param_ids=[ids[i] for i in idx], foreach=foreach,
        )  # fmt: skip


MOMENT_DTYPES = (torch.float32, torch.bfloat16)
"""AdamW's moment dtypes: fp32 (the default), or bf16 written by stochastic rounding (half the
state: 4 bytes a param instead of 8; Zamirai et al., arXiv 2010.06192, and torchao's bf16
``_AdamW`` keep bf16 moments with SR)."""
MOMENT_SR_ID_BASE = 1 << 48
"""SR ids of the moments: ``moment_sr_id``, apart from every param's (AdamW: 0..n; Muon's
matrices from 2^32), so a moment never shares its param's random bits."""


def moment_sr_id(param_id: int, which: int) -> int:
    """The SR param id of moment ``which`` (0: exp_avg, 1: exp_avg_sq) of SR id ``param_id``."""
    return MOMENT_SR_ID_BASE + 2 * param_id + which


def _store_moments_(ps, ms, vs, ms32, vs32, steps: list[int], ids: list[int], *, seed: int) -> None:
    """The fp32 moments ``ms32``, ``vs32`` into the bf16 state ``ms``, ``vs`` by stochastic
    rounding (unbiased: E[m] is the fp32 update's m, so small EMA increments are not lost), keyed
    like the params' (seed, step, id, global element index: every replica and shard rounds alike,
    a resumed run like an uninterrupted one)."""
    for p, m, v, m32, v32, step, pid in zip(ps, ms, vs, ms32, vs32, steps, ids):
        offset = global_index(p)
        stochastic_round_(m, m32, seed=seed, step=step, param_id=moment_sr_id(pid, 0), offset=offset)
        stochastic_round_(v, v32, seed=seed, step=step, param_id=moment_sr_id(pid, 1), offset=offset)


class AdamW(SettingsState, torch.optim.Optimizer):
    """AdamW (decoupled weight decay) for fp32 or bf16 params; see the module docstring.

    Args:
        params: iterable of params or param-group dicts.
        lr: η >= 0 (float or 0-D tensor); each group holds it as a 0-D float64 tensor that LR
            schedulers fill in place: no torch.compile recompile on change (``optim._hyper``).
        betas: (β1, β2), each in [0, 1).
        eps: >= 0, added to the bias-corrected sqrt(v).
        weight_decay: λ >= 0, decoupled: w ← w(1 - ηλ).
        stochastic_rounding: write bf16 params with SR (keyword-only). The SR key needs the step
            counts on the host: read once per ``step()`` call (``optim._param_io.host_steps``).
        master_weights: keep an fp32 master for non-fp32 params; exact (keyword-only).
        seed: global SR seed (an int >= 0); use the same on every rank.
        foreach: multi-tensor ``torch._foreach_*`` math (True), or the per-parameter loop
            (False, the reference); bitwise equal on CPU. None (default) means True on every
            device: the ops exist everywhere (fused kernels on CUDA; on CPU a C++ loop that, in
            cache-sized chunks, runs as fast as the loop: ``optim._param_io.FOREACH_CHUNK_NUMEL``),
            and the chunks bound the fp32 temporaries held at once.
        moment_dtype: torch.float32 (default) or torch.bfloat16 (keyword-only): bf16 moments
            written by stochastic rounding (``_store_moments_``): half the optimizer state.
            Not the default: measured on small models only (optim/tests/test_bf16_moments.py
            in the scalelab repository), and each step reads the step counts on the host.
    Defaults are torchao's ``_AdamW`` (lr 1e-3, (0.9, 0.999), 1e-8, wd 1e-2).

    Every argument is checked at construction (and every added group's lr, betas, eps,
    weight_decay), with a ValueError naming it. Complex params are stepped as their real and
    imaginary parts (``torch.view_as_real``), as ``torch.optim.AdamW`` does; sparse gradients
    raise torch's RuntimeError. State is created lazily, at the first step where a param has a
    grad (as ``torch.optim``): frozen params cost nothing. ``state_dict()["settings"]`` records
    stochastic_rounding, master_weights, seed and foreach; ``load_state_dict`` refuses one whose
    settings differ (``optim._validate.check_saved_settings``).
    """

    _SETTINGS = ("moment_dtype", "stochastic_rounding", "master_weights", "seed", "foreach")

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        *,
        stochastic_rounding: bool = False,
        master_weights: bool = False,
        seed: int = 0,
        foreach: bool | None = None,
        moment_dtype: torch.dtype = torch.float32,
    ):
        check_bool("AdamW", "stochastic_rounding", stochastic_rounding)
        if moment_dtype not in MOMENT_DTYPES:
            raise ValueError(f"AdamW: moment_dtype must be torch.float32 or torch.bfloat16, got {moment_dtype!r}")
        self.moment_dtype = moment_dtype
        check_bool("AdamW", "master_weights", master_weights)
        check_int("AdamW", "seed", seed, 0)
        if foreach is not None:
            check_bool("AdamW", "foreach", foreach)
        if stochastic_rounding and master_weights:
            raise ValueError("AdamW: choose stochastic_rounding or master_weights, not both")
        self.stochastic_rounding = stochastic_rounding
        self.master_weights = master_weights
        self.seed = seed
        self.foreach = True if foreach is None else foreach
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then the group's keys and hyperparameters are checked (``check_adamw_group``)
        and its lr held as a 0-d tensor (``optim._hyper``)."""
        if isinstance(param_group, dict):
            check_group_keys("AdamW", param_group, self.defaults)
        super().add_param_group(param_group)
        check_adamw_group("AdamW", self.param_groups[-1])
        tensorize_group_(self.param_groups[-1], self.defaults)

    def settings(self) -> dict[str, bool | int | str]:
        """The result-changing settings that are not param-group keys (saved in ``state_dict``);
        ``moment_dtype`` only when not fp32 (state_dicts saved before it existed had fp32)."""
        out = {
            "stochastic_rounding": self.stochastic_rounding, "master_weights": self.master_weights,
            "seed": self.seed, "foreach": self.foreach,
        }  # fmt: skip
        if self.moment_dtype != torch.float32:
            out["moment_dtype"] = dtype_name(self.moment_dtype)
        return out

    def __repr__(self) -> str:
        return repr_with_settings(super().__repr__(), self.settings())

    def _init_state(self, p: Tensor) -> None:
        adamw_init_state_(self.state[p], p, master_weights=self.master_weights, moment_dtype=self.moment_dtype)

    def state_dict(self) -> dict:
        """torch's, plus ``"settings"`` (``settings()``, plain values: weights_only-safe)."""
        return {**super().state_dict(), SETTINGS_KEY: self.settings()}

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, after refusing a foreign state_dict or different settings; fp32 state kept."""
        check_saved_groups("AdamW", state_dict, self.defaults)
        check_saved_settings("AdamW", state_dict, self.settings())
        saved = (state_dict.get(SETTINGS_KEY) or {}).get("moment_dtype", "float32")
        if saved != dtype_name(self.moment_dtype):
            raise ValueError(f"AdamW.load_state_dict: setting 'moment_dtype' was {saved!r} when saved, this "
                             f"optimizer has {dtype_name(self.moment_dtype)!r}; construct it with that moment_dtype "
                             "to resume")
        super().load_state_dict(state_dict)
        restore_fp32_state(self, state_dict)

    def _weight(self, p: Tensor) -> Tensor:
        """The fp32 working copy w of p (``_weight``: its master, p itself, or p upcast)."""
        return _weight(self.state[p], p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        check_dense_grads("AdamW", self.param_groups)
        work = params_with_grads(self.param_groups)  # SR ids: positions over all groups
        live = [p for _, ps, _ in work for p in ps]
        for p in live:
            self._init_state(p)
        steps = [self.state[p]["step"] for p in live]
        keyed = self.stochastic_rounding or self.moment_dtype != torch.float32  # SR keys need the step
        counts = advance_steps_(steps, foreach=self.foreach, sr=keyed)  # None without SR
        sr_steps = None if counts is None else iter(counts)
        for group, ps, ids in work:
            self._step_group(group, ps, ids, None if sr_steps is None else [next(sr_steps) for _ in ps])
        return loss

    def _step_group(self, group: dict, ps: list[Tensor], ids: list[int], sr_steps: list[int] | None) -> None:
        """``adamw_step_group_`` on this optimizer's state and settings."""
        adamw_step_group_(
            self.state, group, ps, ids, sr_steps,
            foreach=self.foreach, stochastic_rounding=self.stochastic_rounding, seed=self.seed,
        )  # fmt: skip
