"""The chunked cross-entropy (scalelab.model.chunked_loss) equals the plain loss over full
logits, value and gradients, and never holds an [n, V] tensor.

Tolerances (relative, ||chunked - plain|| / ||plain||), measured on these cases:
- fp32: loss 1e-6, dh and dw 1e-6 (measured 0, 1e-7, 3e-7: summation order only);
- bf16 / fp16 (and bf16 autocast): loss 1e-4, dh 1e-2, dw 1e-2: both round the logit
  gradient to the compute dtype; dw sums per-chunk bf16 partials in fp32 where the plain
  loss rounds one big matmul (measured dw 2.7e-3 bf16, 3.6e-4 fp16). Against an fp64
  reference, the chunked dw's error is within 1.25x the plain one's (measured 1.14x bf16,
  1.12x fp16: one more rounding per chunk).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from scalelab.model.chunked_loss import chunked_cross_entropy
from scalelab.model.llama import Llama
from scalelab.model.shape import ModelShape
from scalelab.train.step import cross_entropy

TOL = {torch.float32: (1e-6, 1e-6), torch.bfloat16: (1e-4, 1e-2), torch.float16: (1e-4, 1e-2)}
"""dtype -> (loss, gradient) relative tolerance."""


@pytest.fixture(autouse=True)
def _chunked_loss_at_any_size(monkeypatch):
    """These tiny models would take the plain loss (memory.PLAIN_LOSS_MAX_LOGITS): force the
    chunked one, the loss of every run at scale."""
    from scalelab.model import memory

    monkeypatch.setattr(memory, "PLAIN_LOSS_MAX_LOGITS", 0)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def _case(n=300, d=32, V=500, seed=0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=gen)
    w = torch.randn(V, d, generator=gen) * 0.3
    t = torch.randint(0, V, (n,), generator=gen)
    return h, w, t


def _loss_and_grads(fn, h, w, t, dtype):
    h = h.to(dtype).requires_grad_()
    w = w.to(dtype).requires_grad_()
    loss = fn(h, w, t)
    loss.backward()
    return loss.detach(), h.grad, w.grad


def _plain(h, w, t):
    return F.cross_entropy((h @ w.T).float(), t)


def _chunked(h, w, t):
    return chunked_cross_entropy(h, w, t, 64)  # 300 = 4 x 64 + 44: a ragged last chunk


def _supported(dtype: torch.dtype) -> bool:
    try:
        torch.ones(2, 2, dtype=dtype) @ torch.ones(2, 2, dtype=dtype)
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_equals_plain_loss_and_gradients(dtype):
    if not _supported(dtype):
        pytest.skip(f"no {dtype} matmul on this CPU")
    h, w, t = _case()
    got = _loss_and_grads(_chunked, h, w, t, dtype)
    want = _loss_and_grads(_plain, h, w, t, dtype)
    loss_tol, grad_tol = TOL[dtype]
    assert got[0].dtype == torch.float32
    assert got[1].dtype == got[2].dtype == dtype
    assert _rel(got[0], want[0]) <= loss_tol
    assert _rel(got[1], want[1]) <= grad_tol
    assert _rel(got[2], want[2]) <= grad_tol
    if dtype != torch.float32:  # dw's error against fp64: about the plain loss's
        ref = _loss_and_grads(_plain, h, w, t, torch.float64)
        assert _rel(got[2], ref[2]) <= 1.25 * _rel(want[2], ref[2])


def test_autocast_matches_plain_linear_under_autocast():
    """The trainer's 'bf16-autocast' path: fp32 h and w, bf16 matmuls, fp32 grads."""
    h, w, t = _case()

    def plain(h, w, t):
        return F.cross_entropy(F.linear(h, w).float(), t)

    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = _loss_and_grads(_chunked, h, w, t, torch.float32)
        want = _loss_and_grads(plain, h, w, t, torch.float32)
    assert got[1].dtype == got[2].dtype == torch.float32
    loss_tol, grad_tol = TOL[torch.bfloat16]
    assert _rel(got[0], want[0]) <= loss_tol
    assert _rel(got[1], want[1]) <= grad_tol
    assert _rel(got[2], want[2]) <= grad_tol


def test_gradcheck_float64():
    h, w, t = _case(n=13, d=4, V=11, seed=1)
    h, w = h.double().requires_grad_(), w.double().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: chunked_cross_entropy(a, b, t, 5), (h, w))


def test_chunk_sizes_agree_and_are_deterministic():
    h, w, t = _case()
    runs = [_loss_and_grads(lambda a, b, c, k=k: chunked_cross_entropy(a, b, c, k), h, w, t,
                            torch.float32) for k in (64, 64, 1, 7, 10_000)]
    for x, y in zip(runs[0], runs[1]):
        assert torch.equal(x, y)  # bitwise: a resumed run repeats the same numbers
    for other in runs[2:]:
        for x, y in zip(runs[0], other):
            assert _rel(x, y) <= 1e-6


def test_no_grad_path_gives_the_same_loss():
    h, w, t = _case()
    with torch.no_grad():
        value = chunked_cross_entropy(h, w, t, 64)
    assert torch.equal(value, _chunked(h.requires_grad_(), w, t).detach())


class _Largest(TorchDispatchMode):
    """The most elements of any tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in tree_leaves(out):
            if isinstance(x, torch.Tensor):
                self.numel = max(self.numel, x.numel())
        return out


def test_never_holds_an_n_by_V_tensor():
    """Saved for backward: dh [n, d] and dw [V, d] only; no op output (forward or
    backward) is larger than one chunk's [c, V] logits."""
    n, d, V, chunk = 300, 32, 500, 64
    h, w, t = _case(n, d, V)
    h.requires_grad_(), w.requires_grad_()
    saved = []

    def pack(x):
        saved.append((tuple(x.shape), x.untyped_storage().nbytes()))
        return x

    largest = _Largest()
    with largest, torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        loss = chunked_cross_entropy(h, w, t, chunk)
    with largest:
        loss.backward()
    assert sorted(saved) == sorted([((n, d), 4 * n * d), ((V, d), 4 * V * d)])
    assert largest.numel == chunk * V < n * V
    plain = _Largest()
    with plain:
        _plain(h, w, t).backward()
    assert plain.numel == n * V  # what the chunked loss avoids


SHAPE = ModelShape(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=80)


@pytest.mark.parametrize("tie", [False, True])
def test_model_loss_equals_cross_entropy_of_logits(tie):
    """``model(x, targets=y)`` (the trainer's loss) == cross_entropy(model(x), y), value
    and every parameter's gradient, fp32."""
    import dataclasses

    shape = dataclasses.replace(SHAPE, tie_embeddings=tie)
    model = Llama(shape, 256)
    model.init_weights(seed=0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (3, 40), generator=gen)
    y = torch.randint(0, 256, (3, 40), generator=gen)

    def grads(loss):
        model.zero_grad(set_to_none=True)
        loss.backward()
        return {k: p.grad.clone() for k, p in model.named_parameters()}

    got_loss = model(x, targets=y)
    got = grads(got_loss)
    want_loss = cross_entropy(model(x), y)
    want = grads(want_loss)
    assert _rel(got_loss, want_loss) <= 1e-6
    for name in want:
        assert _rel(got[name], want[name]) <= 1e-6, name


def test_small_heads_take_the_plain_loss_bit_for_bit(monkeypatch):
    """At most PLAIN_LOSS_MAX_LOGITS logits, ``model(x, targets=y)`` is exactly the plain
    fp32 cross-entropy of the logits, value and gradients (the CPU twin's runs keep the
    numbers they were calibrated with); above it, the chunked loss (not bitwise equal)."""
    from scalelab.model import memory

    model = Llama(SHAPE, 256)
    model.init_weights(seed=0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (3, 40), generator=gen)
    y = torch.randint(0, 256, (3, 40), generator=gen)

    def loss_and_grads(fn):
        model.zero_grad(set_to_none=True)
        loss = fn()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    want, want_g = loss_and_grads(lambda: cross_entropy(model(x), y))
    from scalelab.model import llama

    calls = []

    def spy(*args, **kw):
        calls.append(1)
        return chunked_cross_entropy(*args, **kw)

    monkeypatch.setattr(llama, "chunked_cross_entropy", spy)
    monkeypatch.setattr(memory, "PLAIN_LOSS_MAX_LOGITS", x.numel() * 256)
    got, got_g = loss_and_grads(lambda: model(x, targets=y))
    assert not calls
    assert torch.equal(got, want) and all(torch.equal(a, b) for a, b in zip(got_g, want_g))
    monkeypatch.setattr(memory, "PLAIN_LOSS_MAX_LOGITS", x.numel() * 256 - 1)
    chunked, _ = loss_and_grads(lambda: model(x, targets=y))
    assert calls == [1]
    assert abs(float(chunked) - float(want)) <= 1e-6 * float(want)
