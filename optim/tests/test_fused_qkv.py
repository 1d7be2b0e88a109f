"""Fused QKV weights: found by name and shape, orthogonalised per Q/K/V block.

With ``fused_qkv="split"`` a fused [3·d, d] weight steps exactly as separate q/k/v weights
would under Muon (Jordan's Muon blog) and Scion's Spectral LMO (Pethick et al. 2025, arXiv
2502.07529); weights named like fused QKV whose blocks cannot be told raise one warning.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import optim
from optim.fused_qkv import qkv_blocks
from optim.lmo import Spectral
from optim.routing import muon_param_groups

D = 16


class _Attn(nn.Module):
    """A block with a fused QKV projection named ``qkv`` (rows ``kv_rows`` short for GQA)."""

    def __init__(self, kv_rows: int = 2 * D) -> None:
        super().__init__()
        self.qkv = nn.Linear(D, D + kv_rows, bias=False)
        self.proj = nn.Linear(D, D, bias=False)


class _Model(nn.Module):
    def __init__(self, kv_rows: int = 2 * D, layers: int = 1) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, D)
        self.blocks = nn.ModuleList(_Attn(kv_rows) for _ in range(layers))
        self.head = nn.Linear(D, 32, bias=False)


def _g(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    ("name", "shape", "want"),
    [
        ("attn.in_proj_weight", (3 * D, D), 3),
        ("h.0.attn.qkv.weight", (3 * D, D), 3),
        ("h.0.attn.c_attn.weight", (3 * D, D), 3),
        ("layers.0.Wqkv.weight", (3 * D, D), 3),
        ("h.0.attn.c_attn.weight", (D, 3 * D), None),  # HF Conv1D: stored [in, out]
        ("h.0.attn.qkv.weight", (2 * D, D), None),  # grouped-query: unequal blocks
        ("layers.0.query_key_value.weight", (3 * D, D), None),  # GPT-NeoX: interleaved per head
        ("h.0.mlp.fc.weight", (3 * D, D), 1),
        ("h.0.attn.qkv.bias", (3 * D,), 1),  # a vector: never orthogonalised
    ],
)
def test_qkv_blocks_by_name_and_shape(name, shape, want):
    assert qkv_blocks(name, torch.empty(shape)) == want


def _muon_step(params: list[nn.Parameter], grads: list[torch.Tensor], blocks: int) -> None:
    opt = optim.Muon([{"params": params, "blocks": blocks}], lr=0.1, weight_decay=0.1,
                     ns_dtype=torch.float32)  # fmt: skip
    for _ in range(2):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        opt.step()


def test_muon_split_equals_separate_q_k_v():
    w, g = _g((3 * D, D)), _g((3 * D, D), seed=1)
    fused = nn.Parameter(w.clone())
    _muon_step([fused], [g], blocks=3)
    parts = [nn.Parameter(b.clone()) for b in w.chunk(3)]
    _muon_step(parts, list(g.chunk(3)), blocks=1)
    torch.testing.assert_close(fused.detach(), torch.cat([p.detach() for p in parts]),
                               rtol=0, atol=1e-6)  # fmt: skip
    whole = nn.Parameter(w.clone())
    _muon_step([whole], [g], blocks=1)
    assert not torch.allclose(whole, fused, atol=1e-3)


def test_muon_rejects_blocks_that_do_not_divide_the_rows():
    with pytest.raises(ValueError, match="blocks=3"):
        optim.Muon([{"params": [nn.Parameter(torch.zeros(32, D))], "blocks": 3}])


def test_spectral_blocks_equal_per_block_lmo_and_init():
    g = _g((3 * D, 2 * D))
    split = Spectral(blocks=3, method="svd")
    want = torch.cat([Spectral(method="svd").direction(b) for b in g.chunk(3)])
    torch.testing.assert_close(split.direction(g), want, rtol=0, atol=1e-6)
    w = split.init_(torch.empty(3 * D, 2 * D), generator=torch.Generator().manual_seed(0))
    for b in w.chunk(3):  # each block orthogonal with its own shape factor sqrt(16/32)
        svals = torch.linalg.svdvals(b.double())
        torch.testing.assert_close(svals, torch.full_like(svals, (D / (2 * D)) ** 0.5))


def test_param_groups_split_fused_qkv_and_the_option_turns_it_off():
    model = _Model()
    qkv = model.blocks[0].qkv.weight
    muon = muon_param_groups(model)
    assert [g.get("blocks", 1) for g in muon if any(p is qkv for p in g["params"])] == [3]
    scion = optim.scion_param_groups(model)
    (group,) = [g for g in scion if any(p is qkv for p in g["params"])]
    assert group["norm"] == Spectral(blocks=3) and group["scale"] == 3.0
    opt = optim.Scion(scion)
    fresh = optim.Scion(optim.scion_param_groups(_Model()))
    fresh.load_state_dict(opt.state_dict())  # Spectral(blocks=3) survives the spec round trip
    assert Spectral(blocks=3) in [g["norm"] for g in fresh.param_groups]
    assert all("blocks" not in g for g in muon_param_groups(model, fused_qkv="whole"))
    assert Spectral(blocks=3) not in [g["norm"] for g in optim.scion_param_groups(
        model, fused_qkv="whole")]  # fmt: skip
    with pytest.raises(ValueError, match="fused_qkv"):
        muon_param_groups(model, fused_qkv="heads")


def test_multihead_attention_in_proj_is_split():
    mha = nn.MultiheadAttention(D, 4)
    groups = muon_param_groups(mha)
    assert [g.get("blocks", 1) for g in groups if g["use_muon"]] == [1, 3]


@pytest.mark.parametrize("build", [muon_param_groups, optim.scion_param_groups])
def test_one_warning_names_every_weight_that_cannot_be_told(build):
    model = _Model(kv_rows=D // 2, layers=2)  # GQA-style fused qkv: [24, 16]
    with pytest.warns(UserWarning) as record:
        groups = build(model)
    assert len(record) == 1
    msg = str(record[0].message)
    assert "blocks.0.qkv.weight (24, 16)" in msg and "blocks.1.qkv.weight (24, 16)" in msg
    assert all(g.get("blocks", 1) == 1 for g in groups)
    assert all(g.get("norm") != Spectral(blocks=3) for g in groups)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(model, fused_qkv="whole")
