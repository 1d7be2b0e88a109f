"""Optimizer state exists only for params that got a gradient, as in ``torch.optim``.

State is created at the first ``step()`` where ``p.grad is not None``: a frozen param (no grad,
``requires_grad=False``) costs no memory, and a param that first gets a grad at step k starts
its own step count at 1 there, exactly as ``torch.optim.AdamW`` does. The param-group helpers
leave frozen params out (``muon_param_groups`` like ``scion_param_groups``). A state_dict with
state for only some params still resumes bitwise.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import optim


class _Model(nn.Module):
    """Embedding, two hidden matrices (one frozen), a gain and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.fc = nn.Linear(16, 16, bias=False)
        self.frozen = nn.Linear(16, 16, bias=False)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 32, bias=False)
        self.frozen.weight.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.frozen(torch.relu(self.fc(self.embed(x))))))


def _model() -> _Model:
    torch.manual_seed(0)
    return _Model()


def _train(model: nn.Module, opt: torch.optim.Optimizer, steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randint(0, 32, (4, 8), generator=gen)
        opt.zero_grad()
        model(x).logsumexp(-1).mean().backward()
        opt.step()


MAKERS = {
    "adamw": lambda m: optim.AdamW(m.parameters(), lr=1e-2),
    "muon": lambda m: optim.Muon(
        [{"params": [m.fc.weight, m.frozen.weight]},
         {"params": [m.embed.weight, m.head.weight, *m.norm.parameters()], "use_muon": False, "lr": 1e-2}],
        lr=0.02, ns_dtype=torch.float32),
    "scion": lambda m: optim.Scion(m.parameters(), lr=0.01),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MAKERS))
def test_no_state_before_a_grad_and_none_for_frozen_params(name):
    model = _model()
    opt = MAKERS[name](model)
    assert len(opt.state) == 0 and opt.state_dict()["state"] == {}
    _train(model, opt, 2, seed=0)
    assert model.frozen.weight not in opt.state
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert set(opt.state) == set(trainable)
    assert all(opt.state[p]["step"].item() == 2 for p in trainable)


def test_adamw_state_starts_at_the_first_grad_like_torch():
    """A param without a grad at step 1 gets state at step 2 with step count 1: bitwise
    torch.optim.AdamW (fp32, single-tensor path)."""
    gen = torch.Generator().manual_seed(3)
    w = [torch.randn(8, 8, generator=gen) for _ in range(2)]
    ours = [nn.Parameter(x.clone()) for x in w]
    ref = [nn.Parameter(x.clone()) for x in w]
    opt = optim.AdamW(ours, lr=1e-2, weight_decay=0.1)
    opt_ref = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.1, foreach=False)
    for t in range(3):
        g = [torch.randn(8, 8, generator=gen) for _ in range(2)]
        for i, (p, q) in enumerate(zip(ours, ref)):
            p.grad = q.grad = None if (i == 1 and t == 0) else g[i].clone()
        opt.step()
        opt_ref.step()
        assert (ours[1] in opt.state) == (ref[1] in opt_ref.state)
    assert opt.state[ours[1]]["step"].item() == opt_ref.state[ref[1]]["step"].item() == 2
    for p, q in zip(ours, ref):
        assert torch.equal(p, q)


def test_frozen_param_in_a_group_costs_no_memory():
    big = nn.Parameter(torch.zeros(1024, 1024), requires_grad=False)
    small = nn.Parameter(torch.zeros(4))
    opt = optim.AdamW([big, small])
    small.grad = torch.ones(4)
    opt.step()
    held = sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values())
    assert held < 1024  # 2·4 fp32 moments and a step count, not 8 MiB


def test_muon_param_groups_drop_frozen_params_like_scion():
    model = _model()
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    muon = [p for g in optim.muon_param_groups(model) for p in g["params"]]
    scion = [p for g in optim.scion_param_groups(model) for p in g["params"]]
    assert {id(p) for p in muon} == trainable == {id(p) for p in scion}
    assert len(muon) == len(trainable)


@pytest.mark.parametrize("name", list(MAKERS))
def test_state_dict_with_partial_state_resumes_bitwise(name, tmp_path):
    ref = _model()
    opt_ref = MAKERS[name](ref)
    _train(ref, opt_ref, 2, seed=1)
    path = tmp_path / "ckpt.pt"
    torch.save({"model": ref.state_dict(), "opt": opt_ref.state_dict()}, path)
    _train(ref, opt_ref, 2, seed=2)

    saved = torch.load(path, weights_only=True)
    model = _model()
    model.load_state_dict(saved["model"])
    opt = MAKERS[name](model)
    opt.load_state_dict(saved["opt"])
    assert model.frozen.weight not in opt.state
    _train(model, opt, 2, seed=2)
    for (n, p), q in zip(ref.named_parameters(), model.parameters()):
        assert torch.equal(p, q), n
