"""MoE expert weights and conv kernels: each matrix gets its own polar factor and shape factor.

A 3-D weight [E, d_out, d_in] in a Muon group with ``batched=True`` is E matrices: the update of
expert e is lr·s·polar(U_e), s = max(1, d_out/d_in)^0.5 (KellerJordan/Muon), compared with the
exact polar factor U·Vᵀ of each slice from a float64 SVD. Without the option the weight is
flattened like a conv filter, [d_out, d_in·...], which mixes the experts.

``SpectralConv.factor`` is Scion's conv scaling sqrt(d_out/d_in) / (kernel taps) (Pethick et
al. 2025, arXiv 2502.07529; LIONS-EPFL/scion divides by k² for a square k×k kernel): a kh×kw
kernel has kh·kw taps whichever way it is oriented.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import optim
from optim.lmo import SpectralConv

E, D_OUT, D_IN = 4, 16, 8
LR = 0.1
NS = {"ns_steps": 8, "coefficients": "polar_express_original", "ns_dtype": torch.float32}
"""A schedule that converges: on these Gaussian slices its fp32 result is within 1e-6 of U·Vᵀ
(measured 8.8e-7; Jordan's 5 steps stop 0.2 away by design), so the tolerance below is the NS
error, not slack for a wrong geometry (the flattened update is 0.49 away)."""
ATOL = 1e-5


def _polar64(g: torch.Tensor) -> torch.Tensor:
    """Exact U·Vᵀ of each [d_out, d_in] slice of g [..., d_out, d_in], in float64."""
    u, _, vh = torch.linalg.svd(g.to(torch.float64), full_matrices=False)
    return u @ vh


def _muon_update(w0: torch.Tensor, grad: torch.Tensor, **group) -> torch.Tensor:
    """The update direction O = (w0 - w1)/(lr·s) of one Muon step from zero momentum (wd 0)."""
    p = nn.Parameter(w0.clone())
    opt = optim.Muon([{"params": [p], **group}], lr=LR, **NS)
    p.grad = grad.clone()
    opt.step()
    s = math.sqrt(max(1.0, D_OUT / D_IN))
    return (w0 - p.detach()).to(torch.float64) / (LR * s)


def test_batched_group_orthogonalises_each_expert_against_svd():
    gen = torch.Generator().manual_seed(0)
    w0 = torch.randn(E, D_OUT, D_IN, generator=gen)
    grad = torch.randn(E, D_OUT, D_IN, generator=gen)
    got = _muon_update(w0, grad, batched=True)
    torch.testing.assert_close(got, _polar64(grad), rtol=0, atol=ATOL)


def test_without_batched_a_3d_weight_is_flattened_like_a_conv():
    gen = torch.Generator().manual_seed(0)
    w0 = torch.randn(E, D_OUT, D_IN, generator=gen)
    grad = torch.randn(E, D_OUT, D_IN, generator=gen)
    got = _muon_update(w0, grad)  # [E, D_OUT·D_IN] polar, shape factor max(1, E/(D_OUT·D_IN))^0.5 = 1
    flat = _polar64(grad.reshape(E, -1)).reshape(grad.shape) / math.sqrt(max(1.0, D_OUT / D_IN))
    torch.testing.assert_close(got, flat, rtol=0, atol=ATOL)
    assert (got - _polar64(grad)).abs().max() > 0.1


def test_batched_expert_weight_equals_separate_matrices_bitwise():
    """[E, out, in] with batched=True steps exactly as E separate [out, in] params, several steps."""
    gen = torch.Generator().manual_seed(1)
    w0 = torch.randn(E, D_OUT, D_IN, generator=gen)
    stacked = nn.Parameter(w0.clone())
    parts = [nn.Parameter(w.clone()) for w in w0]
    opt_a = optim.Muon([{"params": [stacked], "batched": True}], lr=LR, weight_decay=0.1)
    opt_b = optim.Muon(parts, lr=LR, weight_decay=0.1)
    for _ in range(3):
        g = torch.randn(E, D_OUT, D_IN, generator=gen)
        stacked.grad = g.clone()
        for p, ge in zip(parts, g):
            p.grad = ge.clone()
        opt_a.step()
        opt_b.step()
    assert torch.equal(stacked.detach(), torch.stack([p.detach() for p in parts]))


def test_batched_must_be_a_bool():
    p = nn.Parameter(torch.zeros(E, D_OUT, D_IN))
    with pytest.raises(ValueError, match="batched must be True or False, got 'yes'"):
        optim.Muon([{"params": [p], "batched": "yes"}])


@pytest.mark.parametrize(
    ("kernel", "taps"), [((1, 3), 3), ((3, 1), 3), ((3, 3), 9), ((5,), 5), ((2, 3, 4), 24)]
)
def test_spectral_conv_factor_divides_by_all_kernel_taps(kernel, taps):
    out_c, in_c = 8, 2
    shape = torch.Size((out_c, in_c, *kernel))
    assert SpectralConv.factor(shape) == pytest.approx(math.sqrt(out_c / in_c) / taps, rel=1e-12)


def test_spectral_conv_factor_same_for_both_orientations_in_the_update():
    """The LMO's output of a (1, 3) and a (3, 1) kernel, transposed taps of the same gradient,
    has the same RMS: the factor no longer depends on which spatial dim comes first."""
    g = torch.randn(6, 4, 1, 3, generator=torch.Generator().manual_seed(2))
    lmo = SpectralConv(method="svd")
    a = lmo.direction(g)
    b = lmo.direction(g.transpose(2, 3).contiguous())
    torch.testing.assert_close(a.pow(2).mean(), b.pow(2).mean(), rtol=1e-6, atol=0)
