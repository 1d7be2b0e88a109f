"""Weights-only optimizer state.

``state_dict()`` of ``optim.AdamW``, ``optim.Muon`` and ``optim.Scion`` holds only tensors and
primitives: Scion's LMOs (Pethick et al. 2025, arXiv 2502.07529) are stored as
``LMO.to_spec()`` dicts and rebuilt by ``load_state_dict``. Each optimizer trains a tiny model
a few steps, is saved with ``torch.save``, loaded with ``torch.load(weights_only=True)`` into
fresh objects, and continues bitwise equal to the uninterrupted run (SR variants included:
their rounding key is the stored step).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

import optim
from optim.lmo import LMO
from optim.routing import muon_param_groups

PRIMITIVES = (torch.Tensor, int, float, bool, str, type(None))


class _Tiny(nn.Module):
    """Embedding, a hidden matrix, a norm gain and an untied head: every routing role."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.fc = nn.Linear(16, 24)
        self.norm = nn.LayerNorm(24)
        self.head = nn.Linear(24, 32, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(torch.relu(self.fc(self.embed(x)))))


def _adamw(m: nn.Module, sr: bool) -> torch.optim.Optimizer:
    return optim.AdamW(m.parameters(), lr=1e-2, stochastic_rounding=sr, seed=3)


def _muon(m: nn.Module, sr: bool) -> torch.optim.Optimizer:
    groups = muon_param_groups(m, adamw={"lr": 3e-3})
    return optim.Muon(groups, lr=0.02, weight_decay=0.1, stochastic_rounding=sr, seed=3)


def _scion(m: nn.Module, sr: bool) -> torch.optim.Optimizer:
    opt = optim.Scion(optim.scion_param_groups(m), lr=torch.tensor(0.01), stochastic_rounding=sr)
    opt.init()
    return opt


MAKERS: dict[str, Callable[[nn.Module, bool], torch.optim.Optimizer]] = {
    "adamw": _adamw, "muon": _muon, "scion": _scion,
}  # fmt: skip


def _make(name: str, dtype: torch.dtype) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = _Tiny().to(dtype)
    return model, MAKERS[name](model, dtype == torch.bfloat16)


def _train(model: nn.Module, opt: torch.optim.Optimizer, steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randint(0, 32, (4, 8), generator=gen)
        opt.zero_grad()
        model(x).float().logsumexp(-1).mean().backward()
        opt.step()


def _assert_primitive(obj: object, where: str = "state_dict") -> None:
    """Only tensors, primitives and (nested) dicts / lists / tuples of them."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            _assert_primitive(k, f"{where} key")
            _assert_primitive(v, f"{where}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _assert_primitive(v, f"{where}[{i}]")
    else:
        assert isinstance(obj, PRIMITIVES), f"{where} is a {type(obj).__name__}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-sr"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_weights_only_round_trip_resumes_bitwise(tmp_path, name, dtype):
    ref, opt_ref = _make(name, dtype)
    _train(ref, opt_ref, 3, seed=1)
    _assert_primitive(opt_ref.state_dict())
    path = tmp_path / "ckpt.pt"
    torch.save({"model": ref.state_dict(), "optimizer": opt_ref.state_dict()}, path)
    _train(ref, opt_ref, 3, seed=2)  # the uninterrupted run

    state = torch.load(path, weights_only=True)
    model, opt = _make(name, dtype)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    _train(model, opt, 3, seed=2)
    for (n, p), q in zip(ref.named_parameters(), model.parameters()):
        assert torch.equal(p, q), n
    for st_ref, st in zip(opt_ref.state.values(), opt.state.values()):
        assert st_ref.keys() == st.keys()
        for k in st_ref:
            assert torch.equal(st_ref[k], st[k]), k


def test_scion_groups_hold_lmos_live_and_specs_saved():
    opt = _make("scion", torch.float32)[1]
    saved = opt.state_dict()["param_groups"]
    assert all(isinstance(g["norm"], dict) and "name" in g["norm"] for g in saved)
    assert all(isinstance(g["norm"], LMO) for g in opt.param_groups)  # live groups untouched
    fresh = _make("scion", torch.float32)[1]
    fresh.load_state_dict(opt.state_dict())
    assert [g["norm"] for g in fresh.param_groups] == [g["norm"] for g in opt.param_groups]


def test_scion_unknown_norm_name_in_a_state_dict_is_refused():
    _, opt = _make("scion", torch.float32)
    sd = opt.state_dict()
    sd["param_groups"][0]["norm"] = {"name": "Spectrl"}
    with pytest.raises(ValueError, match="did you mean 'Spectral'"):
        opt.load_state_dict(sd)
