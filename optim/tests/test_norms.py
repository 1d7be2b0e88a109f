"""optim.norms vs direct float64 numpy definitions (rakkit/disco); power iteration vs svdvals."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from optim import norms

REL = 1e-5
"""fp32 computation vs float64 numpy: relative tolerance."""


def _w(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 0.3


def _np_norms(a: np.ndarray) -> dict:
    """The ``optim.norms`` table, literally, on a float64 [fan_out, fan_in] matrix."""
    fan_out, fan_in = a.shape
    s = np.linalg.svd(a, compute_uv=False)
    return {
        "rms_to_rms": s.max() * math.sqrt(fan_in / fan_out),
        "l1_to_rms": max(np.linalg.norm(a[:, j]) for j in range(fan_in)) / math.sqrt(fan_out),
        "rms_to_inf": math.sqrt(fan_in) * max(np.linalg.norm(a[i, :]) for i in range(fan_out)),
        "supremum": np.abs(a).max(),
        "frobenius": np.sqrt((a**2).sum()),
        "condition_number": s.max() / (s.min() + 1e-20),
    }


def _check(w, a, transpose=False):
    ref = _np_norms(a)
    for k in norms.NORMS:
        got = norms.compute_norm(w, k, transpose=transpose).item()
        assert math.isclose(got, ref[k], rel_tol=REL), (k, got, ref[k])


@pytest.mark.parametrize("shape", [(12, 20), (20, 12), (7, 7)])
def test_matrix_norms_match_definitions(shape):
    w = _w(shape)
    _check(w, w.double().numpy())


def test_embedding_is_transposed():
    w = _w((50, 8))  # [vocab, dim]
    _check(w, w.double().numpy().T, transpose=True)
    # l1_to_rms of the embedding is the largest token-row RMS
    assert math.isclose(norms.l1_to_rms(w, transpose=True).item(), w.pow(2).mean(dim=1).sqrt().max().item(),
                        rel_tol=REL)


def test_vectors_lift_to_diag_and_conv_flattens():
    v = _w((9,), seed=1)
    _check(v, np.diag(v.double().numpy()))
    c = _w((6, 3, 2, 2), seed=2)
    _check(c, c.double().numpy().reshape(6, -1))


def test_scalars_have_only_supremum():
    s = torch.tensor(-2.5)
    assert norms.supremum(s).item() == 2.5
    for k in ("rms_to_rms", "l1_to_rms", "rms_to_inf", "frobenius", "condition_number"):
        with pytest.raises(ValueError):
            norms.compute_norm(s, k)
    with pytest.raises(ValueError):
        norms.compute_norm(_w((3, 3)), "nuclear")


def _power_bound(a: np.ndarray, iters: int) -> float:
    """Bound on 1 - σ̂²/σ₁² after ``iters`` steps from our fixed start: tan²θ₀·(σ₂/σ₁)^(4·iters)."""
    if a.shape[0] < a.shape[1]:
        a = a.T
    _, s, vt = np.linalg.svd(a)
    v0 = torch.randn(a.shape[1], generator=torch.Generator().manual_seed(norms.POWER_SEED)).double().numpy()
    c = vt @ v0
    return float((c[1:] ** 2).sum() / c[0] ** 2 * (s[1] / s[0]) ** (4 * iters))


def test_power_iteration_vs_svdvals_within_theory():
    # prescribed spectrum with a gap (σ₂/σ₁ = 0.8), and plain Gaussian matrices
    u, _ = torch.linalg.qr(_w((30, 30), seed=5).double())
    v, _ = torch.linalg.qr(_w((12, 12), seed=6).double())
    sig = torch.tensor([2.0, 1.6, 1.0, 0.9, 0.5, 0.4, 0.3, 0.2, 0.1, 0.1, 0.05, 0.01], dtype=torch.float64)
    gapped = (u[:, :12] * sig) @ v.T
    for w in (gapped.float(), _w((64, 32), seed=7), _w((24, 48), seed=8)):
        exact = torch.linalg.svdvals(w.double())[0].item()
        for iters in (5, 10, 20, 40):
            est = norms.spectral(w, iters).item()
            deficit = 1 - (est / exact) ** 2
            bound = _power_bound(w.double().numpy(), iters)
            # a lower bound up to fp32 rounding (1e-6), and inside the convergence bound
            assert -1e-6 <= deficit <= bound + 1e-6, (tuple(w.shape), iters, deficit, bound)
    # the default 20 iterations on the gapped matrix: relative error ≤ 0.5·0.8^80 ≈ 1e-8 (+fp32)
    assert math.isclose(norms.rms_to_rms(gapped.float(), iters=20).item(), 2.0 * math.sqrt(12 / 30), rel_tol=1e-6)


def test_power_iteration_is_deterministic_and_handles_zero():
    w = _w((40, 24), seed=3)
    assert torch.equal(norms.spectral(w, 10), norms.spectral(w.clone(), 10))
    assert norms.spectral(torch.zeros(5, 4), 10).item() == 0.0


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(20, 6)
        self.block = nn.Linear(6, 6)
        self.lm_head = nn.Linear(6, 20, bias=False)
        self.scale = nn.Parameter(torch.tensor(0.5))


def test_layer_norms_rows_roles_and_updates():
    torch.manual_seed(0)
    m = _Tiny()
    rows = norms.layer_norms(m, kinds=("l1_to_rms", "rms_to_inf", "supremum"))
    get = {(r["layer"], r["param"], r["norm"]): r["value"] for r in rows}
    emb, head = m.tok_emb.weight.detach(), m.lm_head.weight.detach()
    assert math.isclose(get[("tok_emb", "weight", "l1_to_rms")], emb.pow(2).mean(dim=1).sqrt().max().item(),
                        rel_tol=REL)
    assert math.isclose(get[("lm_head", "weight", "rms_to_inf")], math.sqrt(6) * head.norm(dim=1).max().item(),
                        rel_tol=REL)
    assert ("block", "bias", "rms_to_inf") in get  # 1-D lifted to diag
    assert [k for k in get if k[0] == "" and k[1] == "scale"] == [("", "scale", "supremum")]
    assert all(set(r) == {"layer", "param", "norm", "value"} and isinstance(r["value"], float) for r in rows)
    full = norms.layer_norms(m)
    assert {r["norm"] for r in full} == set(norms.DEFAULT_KINDS)
    upd = norms.update_norms(m, {m.block.weight: torch.ones(6, 6), "lm_head.weight": -2 * torch.ones(20, 6)},
                             kinds=("supremum", "frobenius"))
    assert {(r["layer"], r["norm"]): r["value"] for r in upd} == {
        ("block", "supremum"): 1.0, ("block", "frobenius"): 6.0,
        ("lm_head", "supremum"): 2.0, ("lm_head", "frobenius"): pytest.approx(2 * math.sqrt(120)),
    }
