"""Low-precision formats (issue 40): element grids, RTN and SR onto them, block scales.

Hand-computed values per format; brute force (nearest grid value, ties to the even code)
for round-to-nearest-even; SR's mean error within 3 standard errors over 1e5 draws.
"""

from __future__ import annotations

import math

import pytest
import torch

from optim.stochastic_rounding import random16, sr_key
from scalelab.quant.blocks import Scaling, fake_quantize, padded_numel, quantize
from scalelab.quant.formats import E2M1, E4M3, E5M2, E8M0
from scalelab.quant.rounding import round_nearest, round_stochastic, sr_bits

FORMATS = (E2M1, E4M3, E5M2)


def test_grids_are_the_formats_values():
    assert E2M1.magnitudes == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    e4 = E4M3.magnitudes
    assert (len(e4), e4[1], e4[-1], e4[-2]) == (127, 2.0**-9, 448.0, 416.0)  # no 480 (NaN code)
    e5 = E5M2.magnitudes
    assert (len(e5), e5[1], e5[-1], e5[-2]) == (124, 2.0**-16, 57344.0, 49152.0)  # no inf
    assert (E2M1.emax, E4M3.emax, E5M2.emax) == (2, 8, 15)
    g = E8M0.grid()
    assert (len(g), g[0].item(), g[-1].item()) == (255, 2.0**-127, 2.0**127)
    assert torch.equal(E2M1.grid(), torch.tensor([-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6],
                                                 dtype=torch.float64))


def _brute_rtn(v: torch.Tensor, fmt) -> torch.Tensor:
    """Nearest magnitude, ties to the even code index (IEEE RNE), saturating at max."""
    mags = torch.tensor(fmt.magnitudes, dtype=torch.float64)
    a = v.double().abs().clamp(max=fmt.max)
    d = (a[:, None] - mags[None, :]).abs()
    best = d.min(dim=1, keepdim=True).values
    ties = d == best
    idx = torch.arange(len(mags))
    even = ties & (idx % 2 == 0)
    pick = torch.where(even.any(1), even.float().argmax(1), ties.float().argmax(1))
    return (mags[pick] * torch.sign(v.double())).float()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_rtn_is_nearest_even_on_the_grid(fmt):
    mags = torch.tensor(fmt.magnitudes, dtype=torch.float64)
    mids = ((mags[1:] + mags[:-1]) / 2).float()  # every tie
    gen = torch.Generator().manual_seed(0)
    rand = torch.rand(4000, generator=gen) * fmt.max * 1.2
    tiny = torch.rand(1000, generator=gen) * mags[1].item() * 3
    v = torch.cat([mids, -mids, mags.float(), rand, -rand, tiny, torch.tensor([fmt.max * 10, -1e30])])
    got = round_nearest(v, fmt)
    assert torch.equal(got, _brute_rtn(v, fmt))
    assert torch.isin(got.double(), fmt.grid()).all()


def test_rtn_hand_values_e2m1():
    v = torch.tensor([0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 7.0, -2.5, -0.1])
    want = [0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, -2.0, -0.0]
    assert round_nearest(v, E2M1).tolist() == want


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_sr_lands_on_a_neighbour(fmt):
    gen = torch.Generator().manual_seed(1)
    v = (torch.rand(5000, generator=gen) * 2 - 1) * fmt.max
    got = round_stochastic(v, fmt, sr_bits(0, 3, 7, v.numel())).double()
    lo, hi = _brute_floor_ceil(v, fmt)
    assert ((got == lo) | (got == hi)).all()


def _brute_floor_ceil(v, fmt):
    g = fmt.grid()
    x = v.double()[:, None]
    lo = torch.where(g[None, :] <= x, g[None, :], -math.inf).max(1).values
    hi = torch.where(g[None, :] >= x, g[None, :], math.inf).min(1).values
    return lo, hi


@pytest.mark.parametrize(("fmt", "x"), [(E2M1, 1.2), (E2M1, -4.7), (E2M1, 0.1), (E4M3, 300.0),
                                        (E5M2, 1.1e-5)], ids=str)
def test_sr_is_unbiased_within_3_se(fmt, x):
    n = 100_000
    v = torch.full((n,), x, dtype=torch.float32)
    got = round_stochastic(v, fmt, sr_bits(5, 11, 2, n)).double()
    err = got - float(torch.tensor(x, dtype=torch.float32))
    mean, se = err.mean().item(), err.std().item() / math.sqrt(n)
    assert se > 0  # both neighbours drawn
    assert abs(mean) < 3 * se, (mean, se)
    # RTN on the same values is biased by far more than that (the test can fail)
    rtn = round_nearest(v, fmt).double() - float(v[0])
    assert abs(rtn.mean().item()) > 10 * se


def test_sr_bits_are_deterministic_per_key():
    a, b = sr_bits(1, 5, 9, 1000), sr_bits(1, 5, 9, 1000)
    assert torch.equal(a, b)
    assert torch.equal(a, random16(sr_key(1, 5, 9), (0, 1000)))  # the optimizer's SR bits
    for other in (sr_bits(1, 6, 9, 1000), sr_bits(1, 5, 10, 1000), sr_bits(2, 5, 9, 1000)):
        assert (other != a).float().mean() > 0.99
    v = torch.full((1000,), 1.25)
    r1, r2 = (round_stochastic(v, E2M1, sr_bits(1, s, 9, 1000)) for s in (5, 6))
    assert torch.equal(r1, round_stochastic(v, E2M1, a)) and not torch.equal(r1, r2)


def test_mx_scales_are_e8m0_as_the_spec_says():
    # E2M1: X = 2^(floor(log2 amax) - 2); 32-element blocks; 40 columns pad to 64
    x = torch.zeros(2, 40)
    x[0, 0], x[0, 1], x[0, 2] = 5.0, 0.3, -7.0  # amax 7: X = 1; 5 -> 4 (tie: even code), 0.3 -> 0.5,
    # -7 -> -6 (clamped at max)
    x[0, 33] = 0.1  # amax 0.1: floor(log2) = -4, X = 2^-6; 0.1 / X = 6.4 -> 6
    x[1, 5] = 1e-30  # log2 = -99.66: X = 2^(-100 - 2); 1e-30 / X = 5.07 -> 6
    q = quantize(x, Scaling("mx", E2M1, 32))
    assert q.values.shape == (2, 2, 32)
    assert q.scales.flatten().tolist() == [1.0, 2.0**-6, 2.0**-102, 1.0]  # zero block: 1
    d = q.dequantize()
    assert d.shape == x.shape
    assert d[0, :3].tolist() == [4.0, 0.5, -6.0]
    assert d[0, 33].item() == 6 * 2.0**-6 and d[1, 5].item() == 6 * 2.0**-102


def test_nvfp4_scales_are_e4m3_times_a_tensor_scale():
    x = torch.zeros(1, 48)
    x[0, 0] = 6 * 448.0  # tensor amax: s_t = 1, block scale 448
    x[0, 16], x[0, 17] = 6 * 9.7, 2.0  # s_b = E4M3(9.7) = 10; 58.2 / 10 = 5.82 -> 6; 2 / 10 -> 0
    x[0, 32] = 1e-3  # s_b = 1e-3 / 6 = 1.7e-4, below half E4M3's least subnormal (2^-10): 0
    q = quantize(x, Scaling("nv", E2M1, 16))
    assert q.scales.flatten().tolist() == [448.0, 10.0, 0.0]
    assert q.dequantize()[0, [0, 16, 17, 32]].tolist() == [2688.0, 60.0, 0.0, 0.0]


def test_fp8_per_tensor_scale():
    x = torch.tensor([[896.0, 1.0, -3.0]])
    q = quantize(x, Scaling("tensor", E4M3))
    assert q.scales.flatten().tolist() == [2.0]  # amax / 448
    assert q.values.flatten().tolist() == [448.0, 0.5, -1.5]
    g = quantize(x, Scaling("tensor", E5M2))
    assert g.scales.item() == pytest.approx(896 / 57344, rel=1e-7)


@pytest.mark.parametrize("scaling", [Scaling("tensor", E4M3), Scaling("tensor", E5M2), Scaling("mx", E4M3, 32),
                                     Scaling("mx", E5M2, 32), Scaling("mx", E2M1, 32), Scaling("nv", E2M1, 16)],
                         ids=lambda s: f"{s.kind}-{s.element.name}")
@pytest.mark.parametrize("sr", [False, True], ids=["rtn", "sr"])
def test_every_value_dequantizes_onto_the_grid_times_its_scale(scaling, sr):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(24, 72, generator=gen) * torch.logspace(-6, 3, 24)[:, None]
    bits = sr_bits(0, 1, 2, padded_numel(x.shape, scaling)) if sr else None
    q = quantize(x, scaling, bits)
    assert torch.isin(q.values.double(), scaling.element.grid()).all()
    s = q.scales.double()
    if scaling.kind == "mx":
        assert torch.isin(s, E8M0.grid()).all()
    elif scaling.kind == "nv":
        s_t = x.abs().max().double() / (448 * 6)
        ratio = (s / s_t).flatten()
        on_grid = torch.isin(torch.round(ratio * 2**9) / 2**9, E4M3.grid())
        assert on_grid.all() and torch.allclose(ratio, torch.round(ratio * 2**9) / 2**9, rtol=1e-6)
    else:
        assert s.numel() == 1 and s.item() == pytest.approx(x.abs().max().item() / scaling.element.max)
    want = (q.values * q.scales).reshape(24, -1)[:, :72]
    assert torch.equal(q.dequantize(), want)
    # the error is within max/2 of each element's scale (nothing lost outright); an NVFP4
    # block whose E4M3 scale underflows to 0 holds only values below 6·s_t·2^-10
    scale = s.expand(q.values.shape).reshape(24, -1)[:, :72]
    err = (q.dequantize().double() - x.double()).abs()
    assert (err[scale > 0] <= scale[scale > 0] * scaling.element.max / 2).all()
    if scaling.kind == "nv":
        assert (x.double().abs()[scale == 0] <= 6 * s_t * 2**-10 * (1 + 1e-6)).all()
        assert (scale == 0).any()  # these rows span 9 decades: some blocks do underflow
    assert torch.equal(fake_quantize(x, scaling, bits), q.dequantize())
