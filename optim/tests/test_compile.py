"""``torch.compile(opt.step)`` of optim.AdamW and optim.Muon (fp32, and bf16 with
round-to-nearest, an fp32 master (AdamW) or stochastic rounding), on both the multi-tensor
(``foreach=True``) and the per-parameter path, traces as one graph (``fullgraph=True``: a graph
break is an error) and steps as eager does; ``torch._dynamo.explain`` counts 0 breaks for Muon
and Scion.

Dynamo's "eager" backend: the graph is captured and run op by op, so this checks tracing
(graph breaks) without paying for Inductor's code generation. The traced ``addcmul_``
becomes an fma (one rounding instead of two), so fp32 agrees to ``RTOL`` (a few ulps; seen:
1 ulp), not bitwise. Nothing in a step reads a tensor on the host except stochastic rounding,
whose counter-hash key needs the step counts as ints: ``optim._param_io.host_steps`` reads them once
per step (``tolist()``, captured as unbacked ints, no break). The bias corrections are tensor
math on the 0-d step tensors, and the foreach paths group tensors by (device, dtype) in plain
Python (``optim._param_io.foreach_chunks``), which traces; so does the param write-back, whose
data-pointer test once broke the graph (``optim._param_io.write_param_``).
"""

import pytest
import torch
import torch._dynamo

import optim

RTOL = 1e-6
CASES = {
    "fp32": (torch.float32, {}),
    "bf16-nearest": (torch.bfloat16, {}),
    "bf16-master": (torch.bfloat16, {"master_weights": True}),
    "bf16-sr": (torch.bfloat16, {"stochastic_rounding": True}),
}
# Muon keeps no master copy; its SR write is the same per-param code on both paths: one SR
# case, marked slow (tracing it took ~18 s with the former Philox bits, ~3 s with lowbias32)
MUON_CASES = [
    *[(c, f) for c in ("fp32", "bf16-nearest") for f in (True, False)],
    pytest.param("bf16-sr", True, marks=pytest.mark.slow),
]


def _train(make_opt, shapes, dtype, compiled: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen).to(dtype)) for s in shapes]
    opt = make_opt(params)
    torch._dynamo.reset()
    step = torch.compile(opt.step, backend="eager", fullgraph=True) if compiled else opt.step
    for _ in range(3):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen).to(dtype)
        step()
    return [p.detach().clone() for p in params]


def _check(make_opt, shapes, dtype, msg: str) -> None:
    eager = _train(make_opt, shapes, dtype, compiled=False)
    compiled = _train(make_opt, shapes, dtype, compiled=True)
    for a, b in zip(eager, compiled):
        torch.testing.assert_close(b.float(), a.float(), rtol=RTOL, atol=0, msg=msg)


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_adamw_step_compiles_fullgraph_and_matches_eager(case, foreach):
    dtype, kw = CASES[case]

    def make(ps):
        return optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=foreach, **kw)

    _check(make, ((8, 4), (5,)), dtype, f"{case} foreach={foreach}")


@pytest.mark.parametrize(("case", "foreach"), MUON_CASES)
def test_muon_step_compiles_fullgraph_and_matches_eager(case, foreach):
    """Muon params (momentum, Nesterov, NS in fp32) and an AdamW group, with a tensor lr."""
    dtype, kw = CASES[case]

    def make(ps):
        groups = [{"params": ps[:2]}, {"params": ps[2:], "use_muon": False, "lr": torch.tensor(1e-2)}]
        return optim.Muon(groups, lr=torch.tensor(0.02), weight_decay=0.1, ns_dtype=torch.float32,
                          foreach=foreach, **kw)

    _check(make, ((8, 4), (6, 10), (5,)), dtype, f"{case} foreach={foreach}")


def _tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(32, 16), torch.nn.Linear(16, 16, bias=False),
                               torch.nn.Linear(16, 32, bias=False))


# AdamW is covered by the fullgraph tests above: on torch 2.13 ``explain`` captures no graph of
# its step at all (graph_count 0, graph_break_count -1), so it cannot count breaks there.
OPTIMIZERS = {
    "muon": lambda m: optim.Muon(optim.muon_param_groups(m), lr=0.02),
    "muon-loop": lambda m: optim.Muon(optim.muon_param_groups(m), lr=0.02, foreach=False),
    "scion": lambda m: optim.Scion(optim.scion_param_groups(m), lr=2**-10),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_step_traces_with_zero_graph_breaks(name):
    """``torch._dynamo.explain(opt.step)``: one graph, no break, for fp32 params (before,
    Scion's per-parameter ``step.item()`` host sync broke its graph; it is now read only when
    stochastic rounding needs it)."""
    model = _tiny_model()
    opt = OPTIMIZERS[name](model)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(opt.step)()
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    assert explained.graph_count == 1


RECIPES = {  # the README recipes (optim/tests/test_compile_inductor.py runs them with Inductor)
    "muon+adamw": lambda m: optim.Muon(optim.muon_param_groups(m, head_names=["2"], adamw={"lr": 1e-2}), lr=0.02),
    "scion": lambda m: optim.Scion(optim.scion_param_groups(m, head_names=["2"]), lr=2**-3),
    "adamw": lambda m: optim.AdamW(m.parameters(), lr=1e-2),
}


@pytest.mark.parametrize("name", list(RECIPES))
def test_twenty_steps_with_zero_grad_build_at_most_two_graphs(name):
    """A training loop (backward, compiled step, ``zero_grad()`` freeing the grads) builds one
    graph for the first step (lazy state) and one for every later step: Dynamo calls the backend
    once per graph it compiles, so a counting backend counts them. Before Muon stepped its
    AdamW groups itself, its nested ``optim.AdamW`` made Dynamo guard on each step's new grad
    tensors: a new graph per step until the recompile limit (8)."""
    model = _tiny_model()
    opt = RECIPES[name](model)
    graphs = []

    def counting_eager(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    step = torch.compile(opt.step, backend=counting_eager, fullgraph=True)
    x = torch.randint(0, 32, (4, 9), generator=torch.Generator().manual_seed(0))
    kept = []  # old grads stay alive, so a new grad never reuses a freed one's address or id
    for _ in range(20):
        torch.nn.functional.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten()).backward()
        step()
        kept.append([p.grad for p in model.parameters()])
        opt.zero_grad()
    assert len(graphs) <= 2, f"{name}: {len(graphs)} graphs in 20 steps"
