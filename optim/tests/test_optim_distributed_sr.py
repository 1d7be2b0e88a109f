"""Scion and SR-AdamW on 2 gloo ranks: DDP (replicated) and FSDP2-style DTensor Shard(0) params
give the single-process result."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
from _ranks import run_ranks

import optim
from optim.lmo import BiasRMS, ColNorm, RowNorm, Sign, Spectral

SHAPES = {"a": (16, 8), "b": (16, 8), "c": (8, 24), "head": (10, 8), "emb": (13, 8), "rows": (7, 8), "gain": (8,)}
TOL = 1e-5
"""Max abs param difference to single-process Scion with NS5 (bf16 iteration, batch split differs)."""


def _groups(params):
    return [
        {"params": [params["a"], params["b"], params["c"]], "norm": Spectral(), "scale": 3.0},
        {"params": [params["head"]], "norm": Sign(), "scale": 10.0},
        {"params": [params["emb"]], "norm": ColNorm(transpose=True), "scale": 1.0},
        {"params": [params["rows"]], "norm": RowNorm(), "scale": 2.0},
        {"params": [params["gain"]], "norm": BiasRMS(), "constrained": False},
    ]


def _fulls(dtype):
    g = torch.Generator().manual_seed(0)
    return {k: torch.randn(s, generator=g).to(dtype) for k, s in SHAPES.items()}


def _grads(step):
    g = torch.Generator().manual_seed(100 + step)
    return {k: torch.randn(s, generator=g) for k, s in SHAPES.items()}


def _run(make_param, make_grad, opt_fn, dtype, steps=4):
    params = {k: torch.nn.Parameter(make_param(v)) for k, v in _fulls(dtype).items()}
    opt = opt_fn(params)
    for t in range(steps):
        for k, g in _grads(t).items():
            params[k].grad = make_grad(g.to(dtype))
        opt.step()
    return {k: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach() for k, p in params.items()}, opt


def _worker(rank, world, init_file, out_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    import optim.distributed as dist_ops

    calls = {"ddp": 0, "fsdp": 0}
    ddp_orig, fsdp_orig = dist_ops.ddp_matrix_apply, dist_ops.fsdp_matrix_apply

    def ddp_count(*a, **k):
        calls["ddp"] += 1
        return ddp_orig(*a, **k)

    def fsdp_count(*a, **k):
        calls["fsdp"] += 1
        return fsdp_orig(*a, **k)

    dist_ops.ddp_matrix_apply, dist_ops.fsdp_matrix_apply = ddp_count, fsdp_count
    mesh = init_device_mesh("cpu", (world,))
    shard = lambda t: distribute_tensor(t, mesh, [Shard(0)])
    same = lambda t: t
    scion = lambda **kw: (lambda ps: optim.Scion(_groups(ps), lr=0.05, momentum=0.9, **kw))
    sr_scion = lambda **kw: (
        lambda ps: optim.Scion(_groups(ps)[1:], lr=0.05, stochastic_rounding=True, seed=9, **kw))
    adamw = lambda ps: optim.AdamW(ps.values(), lr=1e-2, stochastic_rounding=True, seed=9)
    res = {}
    res["ref"], _ = _run(same, same, scion(distributed_mode="none"), torch.float32)
    res["ddp"], opt = _run(same, same, scion(distributed_mode="ddp"), torch.float32)
    res["ddp_calls"] = calls["ddp"]
    res["fsdp"], opt = _run(shard, shard, scion(), torch.float32)
    res["fsdp_calls"] = calls["fsdp"]
    res["state_keys"] = sorted(opt.state_dict()["state"])
    # DCP round trip of the sharded Scion state (momentum DTensors, LMO objects in the groups)
    import torch.distributed.checkpoint as dcp

    ckpt = os.path.join(os.path.dirname(init_file), "dcp")
    dcp.save({"optim": opt.state_dict()}, checkpoint_id=ckpt)
    fresh = scion()({k: torch.nn.Parameter(shard(v)) for k, v in _fulls(torch.float32).items()})
    # State is created at a param's first step (as torch.optim's): give the fresh optimizer
    # the layout DCP loads into, as get_state_dict/set_state_dict do (torch's own helper).
    from torch.distributed.checkpoint.state_dict import _init_optim_state

    _init_optim_state(fresh)
    sd = {"optim": fresh.state_dict()}
    dcp.load(sd, checkpoint_id=ckpt)
    fresh.load_state_dict(sd["optim"])
    saved, loaded = opt.state_dict(), fresh.state_dict()
    res["dcp_equal"] = all(
        torch.equal(saved["state"][i][k].full_tensor(), loaded["state"][i][k].full_tensor())
        if hasattr(saved["state"][i][k], "full_tensor") else torch.equal(saved["state"][i][k], loaded["state"][i][k])
        for i in saved["state"] for k in saved["state"][i]
    ) and [g["norm"] for g in saved["param_groups"]] == [g["norm"] for g in loaded["param_groups"]]
    res["sr_ref"], _ = _run(same, same, sr_scion(distributed_mode="none"), torch.bfloat16)
    res["sr_fsdp"], _ = _run(shard, shard, sr_scion(), torch.bfloat16)
    res["adamw_ref"], _ = _run(same, same, adamw, torch.bfloat16)
    res["adamw_fsdp"], _ = _run(shard, shard, adamw, torch.bfloat16)
    inits = []
    for make in (same, shard):  # Scion.init: a shard holds its rows of the full (seeded) init
        ps = {k: torch.nn.Parameter(make(v)) for k, v in _fulls(torch.float32).items()}
        optim.Scion(_groups(ps), seed=4).init()
        inits.append({k: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach() for k, p in ps.items()})
    res["init_ref"], res["init_fsdp"] = inits
    torch.save(res, f"{out_file}.{rank}")
    dist.destroy_process_group()


@pytest.mark.xdist_group("dist")
def test_scion_and_sr_adamw_ddp_fsdp_equal_single_process():
    with tempfile.TemporaryDirectory() as tmp:
        init_file, out = os.path.join(tmp, "init"), os.path.join(tmp, "res")
        run_ranks(_worker, (2, init_file, out))
        ranks = [torch.load(f"{out}.{r}") for r in range(2)]
    for res in ranks:
        assert res["ddp_calls"] == 4 and res["fsdp_calls"] == 4  # the distributed paths ran
        for mode in ("ddp", "fsdp"):
            diff = max((res[mode][k] - res["ref"][k]).abs().max().item() for k in SHAPES)
            print(f"Scion {mode} vs single process: max |Δparam| = {diff:.2e}")
            assert diff <= TOL
        for k in SHAPES:  # bf16 + SR: bitwise, the rounding does not depend on the sharding
            if k not in ("a", "b", "c"):
                assert torch.equal(res["sr_fsdp"][k], res["sr_ref"][k]), k
            assert torch.equal(res["adamw_fsdp"][k], res["adamw_ref"][k]), k
        assert res["state_keys"] == list(range(len(SHAPES)))
        assert res["dcp_equal"]
        for k in SHAPES:
            assert torch.equal(res["init_fsdp"][k], res["init_ref"][k]), k
    for k in SHAPES:  # replicas agree bit for bit
        assert torch.equal(ranks[0]["ddp"][k], ranks[1]["ddp"][k])
