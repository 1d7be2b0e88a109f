"""The multi-tensor (``foreach=True``) paths of optim.AdamW and optim.Muon against their
per-parameter loops (``foreach=False``, the reference), and AdamW's tensor-step bias
corrections against the host-scalar step they replace.

Every comparison is bitwise (``torch.equal``) on params and on every state tensor, after
several steps: on CPU the foreach ops run tensor by tensor through the same kernels as the
loop, and the bias corrections reproduce Python's float math exactly, so any difference is a bug.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import optim
from optim import _param_io
from optim._param_io import foreach_chunks, local, write_param_
from optim.adamw import bias_corrections

STEPS = 6
SHAPES = [(16, 8), (8,), (3, 4, 5), (12, 12)]


def _grads(step: int, shapes=SHAPES) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return [torch.randn(s, generator=g) for s in shapes]


def _params(dtypes, shapes=SHAPES, seed=0) -> list[nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [nn.Parameter(torch.randn(s, generator=g).to(d)) for s, d in zip(shapes, dtypes)]


def _run(make_opt, dtypes, steps=STEPS, shapes=SHAPES, skip=None):
    """Params and optimizer after ``steps`` steps; param ``skip`` gets no grad on odd steps,
    so the per-param step counts differ (and the bias corrections with them)."""
    params = _params(dtypes, shapes)
    opt = make_opt(params)
    for t in range(steps):
        for i, (p, g) in enumerate(zip(params, _grads(t, shapes))):
            p.grad = None if (i == skip and t % 2) else g.to(p.dtype)
        opt.step()
    return params, opt


def _assert_same(a: tuple, b: tuple) -> None:
    (pa, oa), (pb, ob) = a, b
    for x, y in zip(pa, pb):
        assert x.dtype == y.dtype and torch.equal(x.detach(), y.detach())
    for x, y in zip(pa, pb):
        sa, sb = oa.state[x], ob.state[y]
        assert sa.keys() == sb.keys()
        for k in sa:
            assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


BF16, F32 = torch.bfloat16, torch.float32
ADAMW_CASES = {
    "fp32": ([F32] * 4, {}),
    "bf16-nearest": ([BF16] * 4, {}),
    "bf16-master": ([BF16] * 4, {"master_weights": True}),
    "bf16-sr": ([BF16] * 4, {"stochastic_rounding": True, "seed": 3}),
    "mixed-sr": ([F32, BF16, F32, BF16], {"stochastic_rounding": True}),  # two (device, dtype) groups
}


def _adamw(kw, *, foreach, tensor_lr=False, cls=optim.AdamW):
    def make(ps):
        lr = (lambda v: torch.tensor(v)) if tensor_lr else (lambda v: v)
        groups = [{"params": ps[:2], "lr": lr(3e-2)}, {"params": ps[2:], "lr": lr(1e-2), "weight_decay": 0.0}]
        return cls(groups, betas=(0.9, 0.95), weight_decay=0.1, foreach=foreach, **kw)

    return make


@pytest.mark.parametrize("tensor_lr", [False, True])
@pytest.mark.parametrize("case", list(ADAMW_CASES))
def test_adamw_foreach_matches_loop_bitwise(case, tensor_lr, monkeypatch):
    dtypes, kw = ADAMW_CASES[case]
    loop = _run(_adamw(kw, foreach=False, tensor_lr=tensor_lr), dtypes, skip=1)
    assert not loop[1].foreach
    fast = _run(_adamw(kw, foreach=True, tensor_lr=tensor_lr), dtypes, skip=1)
    _assert_same(loop, fast)
    monkeypatch.setitem(_param_io.FOREACH_CHUNK_NUMEL, "cpu", 100)  # several chunks per group
    _assert_same(loop, _run(_adamw(kw, foreach=True, tensor_lr=tensor_lr), dtypes, skip=1))


def test_foreach_is_the_default():
    assert optim.AdamW(_params([F32])).foreach and optim.Muon([nn.Parameter(torch.ones(4, 4))]).foreach


def test_foreach_chunks_group_by_device_dtype_and_cap():
    ts = [torch.zeros(60), torch.zeros(3, dtype=BF16), torch.zeros(50), torch.zeros(200), torch.zeros(1)]
    assert foreach_chunks(ts, max_numel=100) == [[0], [2], [3], [4], [1]]
    assert foreach_chunks(ts, max_numel=1000) == [[0, 2, 3, 4], [1]]
    cpu = [torch.zeros(1 << 15) for _ in range(3)]  # default CPU cap 2^16: cache-sized chunks
    assert foreach_chunks(cpu) == [[0, 1], [2]]
    # other devices: 2^24 or the largest tensor, whichever is larger (meta: no memory)
    meta = [torch.empty(n, device="meta") for n in (1 << 25, 1 << 23, 1 << 23, 1 << 23, 1 << 24)]
    assert foreach_chunks(meta) == [[0], [1, 2, 3], [4]]


class _HostScalarAdamW(optim.AdamW):
    """optim.AdamW.step as it was before the tensor step: ``t = int(step.item())`` per param and
    Python float bias corrections. The oracle for bitwise equality with the current code."""

    @torch.no_grad()
    def step(self, closure=None):
        param_id = 0
        for group in self.param_groups:
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                pid, param_id = param_id, param_id + 1
                if p.grad is None:
                    continue
                self._init_state(p)  # lazy, at the first grad (as optim.AdamW.step)
                st = self.state[p]
                st["step"] += 1
                t = int(st["step"].item())
                m, v = local(st["exp_avg"]), local(st["exp_avg_sq"])
                g = local(p.grad).to(torch.float32)
                w = self._weight(p)
                w.mul_(1 - lr * wd)
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                step_size = lr / (1 - beta1**t)
                denom = (v.sqrt() / (1 - beta2**t) ** 0.5).add_(eps)
                if torch.is_tensor(step_size):
                    w.addcdiv_(m * step_size, denom, value=-1.0)
                else:
                    w.addcdiv_(m, denom, value=-step_size)
                write_param_(p, w, stochastic_rounding=self.stochastic_rounding, seed=self.seed, step=t, param_id=pid)


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("tensor_lr", [False, True])
@pytest.mark.parametrize("case", list(ADAMW_CASES))
def test_adamw_equals_host_scalar_step_bitwise(case, tensor_lr, foreach):
    """Per step, the tensor-step AdamW writes the bits the host-scalar version wrote."""
    dtypes, kw = ADAMW_CASES[case]
    ref_params, got_params = _params(dtypes), _params(dtypes)
    ref_opt = _adamw(kw, foreach=False, tensor_lr=tensor_lr, cls=_HostScalarAdamW)(ref_params)
    got_opt = _adamw(kw, foreach=foreach, tensor_lr=tensor_lr)(got_params)
    for t in range(3 * STEPS):
        for i, (p, q, g) in enumerate(zip(ref_params, got_params, _grads(t))):
            p.grad = q.grad = None if (i == 2 and t % 3 == 1) else g.to(p.dtype)
        ref_opt.step()
        got_opt.step()
        _assert_same((ref_params, ref_opt), (got_params, got_opt))


def test_bias_corrections_equal_python_float_math():
    steps = [torch.tensor(float(t)) for t in [*range(1, 3001), 10_000, 123_457, 1_000_000]]
    for beta1, beta2 in [(0.9, 0.999), (0.95, 0.9999), (0.8, 0.95), (0.0, 0.5)]:
        bc1, bc2_sqrt = bias_corrections(steps, beta1, beta2)
        want1 = [1 - beta1 ** int(t) for t in steps]
        want2 = [(1 - beta2 ** int(t)) ** 0.5 for t in steps]
        assert bc1.tolist() == want1
        assert [float(b) for b in bc2_sqrt] == want2


NO_SR = {  # name -> (param dtypes, optimizer over the params of SHAPES)
    "adamw-fp32": ([F32] * 4, lambda ps, fe: optim.AdamW(ps, lr=torch.tensor(1e-2), foreach=fe)),
    "adamw-bf16-master": (
        [BF16] * 4,
        lambda ps, fe: optim.AdamW(ps, lr=torch.tensor(1e-2), master_weights=True, foreach=fe),
    ),
    "muon": (  # Muon on the two matrices, AdamW on the rest
        [F32] * 4,
        lambda ps, fe: optim.Muon(
            [{"params": [ps[0], ps[3]]}, {"params": [ps[1], ps[2]], "use_muon": False}],
            lr=torch.tensor(0.02), foreach=fe,
        ),
    ),
}


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("case", list(NO_SR))
def test_steps_without_sr_never_read_a_tensor_on_the_host(monkeypatch, case, foreach):
    """No ``.item()``, ``.tolist()``, ``float()``, ``int()`` or ``bool()`` of a tensor in a step
    (the per-parameter ``step.item()`` of AdamW is gone; only SR reads the steps)."""
    dtypes, make = NO_SR[case]
    params = _params(dtypes)
    opt = make(params, foreach)
    for p, g in zip(params, _grads(0)):
        p.grad = g.to(p.dtype)

    def forbidden(*_a, **_k):
        raise AssertionError("host read of a tensor in step()")

    for name in ("item", "tolist", "__float__", "__int__", "__bool__"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    opt.step()
    opt.step()
    monkeypatch.undo()
    assert all(opt.state[p]["step"].item() == 2 for p in params)


MUON_CASES = {
    "fp32": (F32, {}),
    "bf16-nearest": (BF16, {}),
    "bf16-sr": (BF16, {"stochastic_rounding": True, "seed": 5}),
}
MUON_SHAPES = [(16, 8), (8, 24), (12, 12), (8,), (20, 4), (6, 2, 3)]


@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("case", list(MUON_CASES))
def test_muon_foreach_matches_loop_bitwise(case, nesterov, monkeypatch):
    dtype, kw = MUON_CASES[case]

    def make(foreach):
        def opt(ps):
            groups = [{"params": [ps[0], ps[1], ps[2], ps[5]]},
                      {"params": [ps[3], ps[4]], "use_muon": False, "lr": 1e-2, "weight_decay": 0.1}]
            return optim.Muon(groups, lr=0.02, momentum=torch.tensor(0.9), weight_decay=0.1, nesterov=nesterov,
                              ns_dtype=torch.float32, foreach=foreach, **kw)
        return opt

    dtypes = [dtype] * len(MUON_SHAPES)
    loop = _run(make(False), dtypes, shapes=MUON_SHAPES, skip=1)
    assert not loop[1].foreach
    fast = _run(make(True), dtypes, shapes=MUON_SHAPES, skip=1)
    assert fast[1].foreach
    _assert_same(loop, fast)
    monkeypatch.setitem(_param_io.FOREACH_CHUNK_NUMEL, "cpu", 100)
    _assert_same(loop, _run(make(True), dtypes, shapes=MUON_SHAPES, skip=1))
