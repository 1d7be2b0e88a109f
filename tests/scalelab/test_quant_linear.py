"""Emulated quantized GEMMs (issue 40): QuantLinear's forward and both backward GEMMs equal a
float64 GEMM of the quantized operands (to 1e-6 relative), SR keys, and the model swap."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from scalelab.config import ModelConfig
from scalelab.model import build_model
from scalelab.quant import RECIPES, quantize_linears, set_quant_step
from scalelab.quant.blocks import fake_quantize, padded_numel
from scalelab.quant.linear import QuantLinear, SrKey
from scalelab.quant.rounding import sr_bits

REL = 1e-6
"""fp32 accumulation over K <= 100 terms of exactly representable products: ~1e-7 relative."""


def _rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.double() - ref).abs().max() / ref.abs().max()).item()


def _q64(t, scaling, key=None, operand=0):
    bits = None
    if key is not None:
        bits = sr_bits(key.seed, key.step, key.tensor_id(operand), padded_numel(t.shape, scaling))
    return fake_quantize(t, scaling, bits).double()


@pytest.mark.parametrize("name", list(RECIPES))
def test_gemms_match_float64_of_the_quantized_operands(name):
    recipe = RECIPES[name]
    gen = torch.Generator().manual_seed(0)
    layer = QuantLinear(72, 40, bias=False, recipe=recipe, quant_id=123)  # 72: MX blocks pad
    with torch.no_grad():
        layer.weight.copy_(torch.randn(40, 72, generator=gen) * 0.05)
    set_quant_step(layer, 7, seed=3)
    x = torch.randn(3, 35, 72, generator=gen, requires_grad=True)  # M = 105 tokens (pads too)
    y = layer(x)
    w = layer.weight.detach()
    x2 = x.detach().reshape(-1, 72)
    ref_y = _q64(x2, recipe.forward) @ _q64(w, recipe.forward).t()
    assert _rel(y.reshape(-1, 40), ref_y) < REL
    assert _rel(y.reshape(-1, 40), x2.double() @ w.double().t()) > 1e-3  # it is quantized
    g = torch.randn(3, 35, 40, generator=gen)
    y.backward(g)
    key = SrKey(3, 7, 123, 0) if recipe.grad_rounding == "sr" else None
    g2 = g.reshape(-1, 40)
    ref_dx = _q64(g2, recipe.grad, key, 0) @ _q64(w.t(), recipe.forward).t()
    ref_dw = _q64(g2.t(), recipe.grad, key, 1) @ _q64(x2.t(), recipe.forward).t()
    assert _rel(x.grad.reshape(-1, 72), ref_dx) < REL
    assert _rel(layer.weight.grad, ref_dw) < REL


def _grads(recipe, step, seed=0, calls=1):
    gen = torch.Generator().manual_seed(1)
    layer = QuantLinear(64, 32, bias=False, recipe=recipe, quant_id=5)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(32, 64, generator=gen))
    set_quant_step(layer, step, seed)
    x = torch.randn(64, 64, generator=gen)
    for _ in range(calls):
        layer(x).pow(2).sum().backward()
    return layer.weight.grad.clone()


def test_sr_gradients_are_keyed_by_step_seed_and_call():
    fp4, fp8 = RECIPES["mxfp4"], RECIPES["fp8"]
    assert torch.equal(_grads(fp4, 4), _grads(fp4, 4))  # same key, same bits
    assert not torch.equal(_grads(fp4, 4), _grads(fp4, 5))  # another step rounds otherwise
    assert not torch.equal(_grads(fp4, 4), _grads(fp4, 4, seed=1))
    # two micro-batches with the same data: calls 0 and 1 draw different bits
    assert not torch.equal(_grads(fp4, 4, calls=2), 2 * _grads(fp4, 4))
    assert torch.equal(_grads(fp8, 4), _grads(fp8, 5))  # FP8 gradients round to nearest


def test_sr_gradient_is_unbiased_over_steps():
    """The mean of the FP4 SR weight gradient over 400 steps approaches the gradient of the
    quantized forward (RTN gradients stay biased): |mean - exact| shrinks by > 5x."""
    recipe = RECIPES["nvfp4"]
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(16, 32, generator=gen)
    x = torch.randn(32, 32, generator=gen)
    g = torch.randn(32, 16, generator=gen)
    exact = g.t().double() @ _q64(x.t(), recipe.forward).t()  # E[Q_sr(g)] = g below max
    layer = QuantLinear(32, 16, bias=False, recipe=recipe)
    with torch.no_grad():
        layer.weight.copy_(w)
    total = torch.zeros_like(exact)
    for step in range(400):
        set_quant_step(layer, step, 0)
        layer.weight.grad = None
        layer(x).backward(g)
        total += layer.weight.grad.double()
        if step == 0:
            one = (layer.weight.grad.double() - exact).abs().mean().item()
    mean_err = (total / 400 - exact).abs().mean().item()
    assert mean_err < one / 5, (mean_err, one)


def test_quantize_linears_swaps_the_blocks_only():
    model = build_model(ModelConfig(preset="cpu-50k"), vocab_size=256)
    model.init_weights(seed=0)
    before = {n: p for n, p in model.named_parameters()}
    quantize_linears(model, "nvfp4")
    after = dict(model.named_parameters())
    assert list(after) == list(before) and all(after[n] is before[n] for n in before)
    quant = [n for n, m in model.named_modules() if isinstance(m, QuantLinear)]
    assert len(quant) == 7 * model.shape.n_layers
    assert all(n.startswith("layers.") for n in quant)
    assert type(model.lm_head) is nn.Linear and type(model.tok_emb) is nn.Embedding
    ids = {m.quant_id for m in model.modules() if isinstance(m, QuantLinear)}
    assert len(ids) == len(quant)  # every layer draws its own bits
    idx = torch.randint(0, 256, (2, 16))
    loss = model(idx, targets=idx)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(RECIPES))
def test_emulation_on_cuda_matches_the_cpu(name):
    """The emulation on a GPU (bench/gpu.py runs it): the same quantized operands bitwise
    (elementwise ops, correctly rounded), the same SR bits, GEMMs to 1e-6 relative."""
    recipe = RECIPES[name]
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(48, 72, generator=gen) * 0.05
    x = torch.randn(2, 33, 72, generator=gen)
    g = torch.randn(2, 33, 48, generator=gen)
    out = {}
    for dev in ("cpu", "cuda"):
        layer = QuantLinear(72, 48, bias=False, recipe=recipe, quant_id=9, device=dev)
        with torch.no_grad():
            layer.weight.copy_(w)
        set_quant_step(layer, 2, seed=1)
        xd = x.to(dev).requires_grad_()
        layer(xd).backward(g.to(dev))
        out[dev] = [layer(xd).detach().cpu(), xd.grad.cpu(), layer.weight.grad.cpu()]
        key = SrKey(1, 2, 9, 0)
        out[dev].append(fake_quantize(g.to(dev).reshape(-1, 48), recipe.grad,
                                      sr_bits(1, 2, key.tensor_id(0), padded_numel((66, 48), recipe.grad),
                                              dev)).cpu())
    for a, b in zip(out["cpu"][:3], out["cuda"][:3]):
        assert _rel(b, a.double()) < REL
    assert torch.equal(out["cpu"][3], out["cuda"][3])


def test_gemm_path_says_what_runs(monkeypatch):
    from scalelab.quant import select

    assert select.gemm_path("fp32", "cpu") is None and select.gemm_path("bf16-pure", "cuda") is None
    assert select.gemm_path("mxfp4", "cpu") == "emulated"
    monkeypatch.setattr(select.importlib.util, "find_spec", lambda name: object())
    assert select.gemm_path("nvfp4", "cpu") == "emulated"  # torchao or not, the CPU emulates
    assert select.gemm_path("nvfp4", "cuda") == "emulated (torchao present; its kernels are not wired)"
