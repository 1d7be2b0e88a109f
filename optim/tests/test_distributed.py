"""optim.distributed and Muon's DDP / FSDP2 modes on 2 gloo CPU ranks.

Each multi-process test forks 2 ranks once and runs several checks; every rank saves its
results and the test asserts on them. References are computed in the same ranks without
any communication (single-process math on the full batch / full matrices).

Tolerance: max |Δparam| <= 1e-5 against single-process Muon with fp32 Newton-Schulz (the
gradient reduction order and the NS batch composition differ; measured ~1e-7).
"""

from __future__ import annotations

import math
import os
import tempfile

import pytest
import torch
import torch.distributed as dist
from _ranks import run_ranks
from torch import nn

import optim
from optim.distributed import (
    ddp_matrix_apply,
    fsdp_matrix_apply,
    local_matrix_apply,
    plan_owners,
)
from optim.newton_schulz import newton_schulz, ns_flops

TOL = 1e-5
MATS = [(16, 8), (16, 8), (8, 24), (5, 7), (16, 8), (3, 8), (1, 8), (3, 3)]


def _ns32(x):
    return newton_schulz(x, dtype=torch.float32)


class _Net(nn.Module):
    """Shapes chosen for FSDP2 on 2 ranks: (3, 16) and (3, 8) split 2/1 rows, (1, 3) and
    (1, 8) leave rank 1 an empty shard."""

    def __init__(self, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 16)
        self.c = nn.Linear(16, 3)
        self.d = nn.Linear(3, 1)
        self.e = nn.Linear(8, 1, bias=False)
        self.f = nn.Linear(8, 3, bias=False)

    def forward(self, x):
        h = torch.relu(self.b(torch.relu(self.a(x))))
        return self.d(self.c(h) + self.f(x)) + self.e(x)


def _data(step: int):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)


def _muon(model, **kw):
    return optim.Muon(
        optim.muon_param_groups(model, adamw={"lr": 1e-2}), lr=0.05, weight_decay=0.1, ns_dtype=torch.float32, **kw
    )


def _train(model, opt, steps, rank=None, world=1):
    for t in range(steps):
        x, y = _data(t)
        if rank is not None:  # this rank's half of the global batch
            x, y = x.chunk(world)[rank], y.chunk(world)[rank]
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()


def _full(model):
    return {n: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone()
            for n, p in model.named_parameters()}


def _init(rank, world, init_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)


def _ddp_worker(rank, world, init_file, out):
    _init(rank, world, init_file)
    res = {}
    gen = torch.Generator().manual_seed(0)
    mats = [torch.randn(*s, generator=gen) for s in MATS]
    res["ddp_apply_diff"] = max(
        (a - b).abs().max().item() for a, b in zip(ddp_matrix_apply(mats, _ns32), local_matrix_apply(mats, _ns32))
    )
    # row shards as FSDP2 lays them out (torch.chunk), plain tensors + global shapes
    local = [m.chunk(world)[rank] if rank < len(m.chunk(world)) else m[:0] for m in mats]
    got = fsdp_matrix_apply(local, _ns32, global_shapes=[m.shape for m in mats])
    want = [o.chunk(world)[rank] if rank < len(o.chunk(world)) else o[:0] for o in local_matrix_apply(mats, _ns32)]
    res["fsdp_apply_shapes_ok"] = all(g.shape == w.shape for g, w in zip(got, want))
    res["fsdp_apply_diff"] = max((g - w).abs().max().item() if g.numel() else 0.0 for g, w in zip(got, want))

    # Muon under real DDP (grads all-reduced) vs single process on the full batch
    counted = {"mats": 0}
    ns = optim.muon.newton_schulz

    def counting_ns(x, *a, **k):
        counted["mats"] += x.shape[0]
        return ns(x, *a, **k)

    ref = _Net(0)
    _train(ref, _muon(ref, distributed_mode="none"), steps=3)
    model = _Net(0)
    opt = _muon(model, distributed_mode="ddp")
    ddp = nn.parallel.DistributedDataParallel(model)
    optim.muon.newton_schulz = counting_ns
    _train(ddp, opt, steps=3, rank=rank, world=world)
    optim.muon.newton_schulz = ns
    res["ddp_ns_matrices"] = counted["mats"]
    res["ddp_params"], res["ref_params"] = _full(model), _full(ref)

    # bf16 params with stochastic rounding: replicas stay bit-identical
    torch.manual_seed(5)
    p = nn.Parameter(torch.randn(24, 16).to(torch.bfloat16))
    q = nn.Parameter(torch.randn(16, 40).to(torch.bfloat16))
    sr = optim.Muon([p, q], lr=0.01, stochastic_rounding=True, seed=7, distributed_mode="ddp")
    for t in range(3):
        g = torch.Generator().manual_seed(50 + t)
        p.grad = torch.randn(24, 16, generator=g).to(torch.bfloat16)
        q.grad = torch.randn(16, 40, generator=g).to(torch.bfloat16)
        sr.step()
    res["sr_params"] = [p.detach().clone(), q.detach().clone()]
    torch.save(res, f"{out}.{rank}")
    del ddp  # its reducer holds the group: destroying the group under it can hang at exit
    dist.destroy_process_group()


def _fsdp_worker(rank, world, init_file, out, ckpt):
    _init(rank, world, init_file)
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.fsdp import fully_shard

    def sharded(seed):
        m = _Net(seed)
        for sub in (m.a, m.b, m.c, m.d, m.e, m.f):
            fully_shard(sub)
        fully_shard(m)
        return m

    res = {}
    ref = _Net(0)
    _train(ref, _muon(ref), steps=3)
    model = sharded(0)
    opt = _muon(model)
    res["mode"] = opt.distributed_mode
    try:  # replicated-only modes would orthogonalise row shards: refused
        _muon(model, distributed_mode="ddp")
        res["ddp_on_shards"] = "accepted"
    except ValueError as e:
        res["ddp_on_shards"] = str(e)
    res["local_rows"] = {n: tuple(p.to_local().shape) for n, p in model.named_parameters()}
    _train(model, opt, steps=3, rank=rank, world=world)
    res["fsdp_params"], res["ref_params"] = _full(model), _full(ref)
    sd = opt.state_dict()
    res["state_structure"] = {
        k: sorted((name, tuple(v.shape), type(v).__name__) for name, v in st.items()) for k, st in sd["state"].items()
    }

    # DCP: save, take a step; load into a differently initialised copy, take the same step
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=ckpt)
    _train(model, opt, steps=1, rank=rank, world=world)
    model2 = sharded(123)
    opt2 = _muon(model2)
    msd2, osd2 = get_state_dict(model2, opt2)
    state = {"model": msd2, "optim": osd2}
    dcp.load(state, checkpoint_id=ckpt)
    set_state_dict(model2, opt2, model_state_dict=state["model"], optim_state_dict=state["optim"])
    _train(model2, opt2, steps=1, rank=rank, world=world)
    res["dcp_diff"] = max((a - b).abs().max().item() for a, b in zip(_full(model).values(), _full(model2).values()))
    torch.save(res, f"{out}.{rank}")
    dist.destroy_process_group()


def _spawn(worker, *extra):
    with tempfile.TemporaryDirectory() as tmp:
        init_file, out = os.path.join(tmp, "init"), os.path.join(tmp, "res")
        run_ranks(worker, (2, init_file, out, *[os.path.join(tmp, e) for e in extra]))
        return [torch.load(f"{out}.{r}", weights_only=False) for r in range(2)]


def _max_diff(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.mark.xdist_group("dist")
def test_ddp_primitives_and_muon_ddp_equal_single_process():
    ranks = _spawn(_ddp_worker)
    for r, res in enumerate(ranks):
        assert res["ddp_apply_diff"] <= 1e-6
        assert res["fsdp_apply_shapes_ok"] and res["fsdp_apply_diff"] <= 1e-6
        diff = _max_diff(res["ddp_params"], res["ref_params"])
        print(f"rank {r}: Muon ddp vs single process max |Δparam| = {diff:.2e}, NS matrices {res['ddp_ns_matrices']}")
        assert diff <= TOL
    # each rank orthogonalised a share of the 6 matrices (3 steps), not all of them
    assert ranks[0]["ddp_ns_matrices"] + ranks[1]["ddp_ns_matrices"] == 6 * 3
    assert 0 < ranks[0]["ddp_ns_matrices"] < 18
    for a, b in zip(ranks[0]["sr_params"], ranks[1]["sr_params"]):
        assert a.dtype == torch.bfloat16 and torch.equal(a, b)


@pytest.mark.xdist_group("dist")
def test_muon_fsdp2_uneven_shards_state_and_dcp():
    ranks = _spawn(_fsdp_worker, "ckpt")
    assert ranks[0]["local_rows"]["c.weight"] == (2, 16) and ranks[1]["local_rows"]["c.weight"] == (1, 16)
    assert ranks[0]["local_rows"]["e.weight"] == (1, 8) and ranks[1]["local_rows"]["e.weight"] == (0, 8)
    for r, res in enumerate(ranks):
        assert res["mode"] == "fsdp"
        assert "distributed_mode='fsdp'" in res["ddp_on_shards"]
        diff = _max_diff(res["fsdp_params"], res["ref_params"])
        print(f"rank {r}: Muon fsdp vs single process max |Δparam| = {diff:.2e}; DCP resume diff {res['dcp_diff']:.1e}")
        assert diff <= TOL
        assert res["dcp_diff"] == 0.0
    assert ranks[0]["state_structure"] == ranks[1]["state_structure"]
    assert len(ranks[0]["state_structure"]) == sum(1 for _ in _Net(0).parameters())


LLAMA = {  # Kim et al. 2025, arXiv 2509.14786: hidden, intermediate, layers, heads, kv heads
    "150M": (512, 1792, 6, 8, 8),
    "600M": (1024, 3584, 24, 16, 8),
    "1.4B": (2048, 7168, 16, 16, 8),
}


def _llama_matrices(hidden, inter, layers, heads, kv):
    kv_dim = hidden // heads * kv
    per_layer = [(hidden, hidden), (kv_dim, hidden), (kv_dim, hidden), (hidden, hidden),
                 (inter, hidden), (inter, hidden), (hidden, inter)]
    return per_layer * layers


@pytest.mark.parametrize("preset", sorted(LLAMA))
@pytest.mark.parametrize("world", [2, 4, 8])
def test_ns_flops_balanced_within_10_percent(preset, world, record_property):
    shapes = _llama_matrices(*LLAMA[preset])
    owners = plan_owners(shapes, world)
    load = [0] * world
    for s, o in zip(shapes, owners):
        load[o] += ns_flops(*s)
    ratio = max(load) / (sum(load) / world)
    split = [round(x / sum(load), 4) for x in load]
    record_property(f"ns_split/{preset}/W{world}", split)
    print(f"{preset} W={world}: NS FLOP share per rank {split}, max/mean {ratio:.4f}")
    assert ratio <= 1.10
    assert plan_owners(shapes, world) == owners  # deterministic: every rank gets the same plan


def test_single_process_fallbacks_and_errors():
    mats = [torch.randn(4, 6), torch.randn(4, 6), torch.randn(6, 2)]
    for got, want in zip(ddp_matrix_apply(mats, _ns32), [_ns32(m[None])[0] for m in mats]):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="global_shapes"):
        fsdp_matrix_apply(mats, _ns32)
    with pytest.raises(ValueError, match="2-D"):
        local_matrix_apply([torch.ones(2, 2, 2)], _ns32)
    with pytest.raises(ValueError, match="changed the shape"):
        local_matrix_apply([torch.ones(2, 3)], lambda x: x[:, :1])
    assert math.isclose(sum(ns_flops(*s) for s in [(4, 6)]), 5 * (4 * 16 * 6 + 2 * 64))
