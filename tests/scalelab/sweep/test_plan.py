"""Plan expansion: run counts, derived N/D/steps/FLOPs against hand computations, ids."""

import hashlib
import textwrap
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from scalelab.config import OptimConfig, RunConfig
from scalelab.errors import UserError
from scalelab.identity import canonical_json, full_id, identity_dict, run_dir_name, run_id
from scalelab.sweep.plan.datasets import DatasetFacts
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.spec.load import load_spec, parse_spec
from scalelab.sweep.view.render import plan_summary, render_plan

SWEEPS = Path(__file__).resolve().parents[3] / "sweeps"
DEFAULT = {("default", 65536): DatasetFacts(vocab_size=256, train_tokens=10_000_000)}

# Kim et al. 2025 shapes (arXiv 2509.14786): hidden, intermediate, layers, heads, KV heads;
# 70M is ours, the fifth size of sweeps/200M_tokens.yaml.
KIM = {"70M": (256, 896, 6, 4, 4), "150M": (512, 1792, 6, 8, 8), "300M": (768, 2688, 12, 12, 12),
       "600M": (1024, 3584, 24, 16, 8), "1.4B": (2048, 7168, 16, 16, 8)}


def hand_params_and_flops(d, ff, layers, heads, kv, vocab, seq):
    """Untied Llama written out by hand: attention q,o (d x d), k,v (d x kv*hd), SwiGLU
    3*d*ff, two RMSNorm gains per layer, a final norm, embedding and head V*d each.
    Training FLOPs/token: 6 x every matmul weight (blocks + head; the embedding lookup is
    free) + 12*L*d*T for QK^T and AV (PaLM App. B), as scalelab.model.counts documents."""
    hd = d // heads
    matrices = 2 * d * d + 2 * d * kv * hd + 3 * d * ff
    total = layers * (matrices + 2 * d) + d + 2 * vocab * d
    flops_per_token = 6 * (layers * matrices + vocab * d) + 12 * layers * d * seq
    return total, flops_per_token


def test_200M_tokens_plan_matches_hand_computation():
    from scalelab.sweep.plan.blocks import expand_blocks
    from scalelab.sweep.spec.blocks import TOP_BLOCK

    spec = load_spec(SWEEPS / "200M_tokens.yaml")
    t = expand_blocks(spec).table.filter(pl.col("block") == TOP_BLOCK) if spec.blocks \
        else expand(spec).table  # the grid itself; later blocks add ensembles, distillation
    lrs, wds, epochs = 6, 8, [1, 2, 4, 8, 16, 32, 64]
    assert t.height == 5 * lrs * wds * len(epochs) == 1680
    assert t["run_id"].n_unique() == 1680
    U = 800 * 64 * 4096
    assert U == 209_715_200
    assert (t["D_unique"] == U).all()
    assert (t["steps"] == (800 * t["data.epochs"]).cast(pl.Int64)).all()
    assert (t["D_total"] == (U * t["data.epochs"]).cast(pl.Int64)).all()
    total = 0.0
    for name, shape in KIM.items():
        n, fpt = hand_params_and_flops(*shape, vocab=128256, seq=4096)
        rows = t.filter(pl.col("model.preset") == name)
        assert rows.height == 336 and (rows["N"] == n).all()
        for e in epochs:
            one = rows.filter(pl.col("data.epochs") == e)["flops"]
            assert one.to_list() == pytest.approx([fpt * U * e] * 48, rel=1e-12)
        total += lrs * wds * sum(epochs) * fpt * U
    assert t["flops"].sum() == pytest.approx(total, rel=1e-12)
    # Named by total untied parameters (Kim et al. 2025; scalelab/model/counts.py):
    # 71.4M (ours), 154.1M, 299.6M, 602.5M, 1.43B.
    names = dict(zip(t["model.preset"], t["N"]))
    assert [round(names[k] / 1e6, 1) for k in KIM] == [71.4, 154.1, 299.6, 602.5, 1431.4]
    hours = total / 3.96e14 / 3600  # launcher.flops_per_gpu_s
    assert t["gpu_hours"].sum() == pytest.approx(hours, rel=1e-12)


def test_dry_run_prints_the_plan(tmp_path, monkeypatch, capsys):
    from scalelab.cli import main
    from scalelab.sweep.plan.blocks import expand_blocks
    from scalelab.sweep.view.render import human

    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(SystemExit) as code:
        main(["sweep", str(SWEEPS / "200M_tokens.yaml"), "--dry-run", "--runs", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert code.value.code == 0
    spec = load_spec(SWEEPS / "200M_tokens.yaml")
    t = (expand_blocks(spec) if spec.blocks else expand(spec)).table
    assert f"{t.height} runs · {human(t['flops'].sum())} FLOPs" in out
    assert f"launch {t.height}, skip 0" in out
    assert "150M_lr0.0001_wd0_ep1" in out
    # resources per model size (derive rules on launcher keys): one job array per line
    groups = out.split("resources (one Slurm job array per line):\n", 1)[1].split("\n\n")[0].splitlines()
    assert groups[0] == "  1 GPU · mem 64G · 1h00: 411 runs"
    assert groups[-1] == "  4 GPU · mem 256G · 24h00: 60 runs"
    assert len(groups) == 12 and sum(int(g.split(": ")[1].split()[0]) for g in groups) == t.height
    assert not (tmp_path / "200M_tokens").exists()  # a dry run changes nothing


def test_tiny_plan_axes_names_ids_and_derived_lr():
    spec = load_spec(SWEEPS / "tiny.yaml")
    plan = expand(spec, datasets=DEFAULT)
    t = plan.table
    assert 8 <= t.height <= 12 and t.height == 12
    assert plan.axes == ("model.preset", "data.unique_tokens", "data.epochs",
                         "optim.weight_decay", "optim.lr")
    assert t.columns[:3] == ["run_id", "name", "run_dir"]
    for cfg, row in zip(plan.configs, t.iter_rows(named=True)):
        assert row["run_id"] == run_id(cfg) == full_id(cfg)[:32]
        assert row["run_dir"] == f"runs/{run_dir_name(cfg)}"
        assert cfg.name == row["name"]
        d_model = {"cpu-50k": 32, "cpu-250k": 64}[cfg.model.preset]
        assert cfg.optim.lr == pytest.approx(min(3e-3 * 128 / d_model, 1.2e-2), rel=1e-15)
        assert row["optim.weight_decay"] == {1.0: 0.1, 2.0: 0.2, 4.0: 0.4}[row["data.epochs"]]
        assert row["steps"] == int(row["data.unique_tokens"] // 128 * row["data.epochs"]) // 16
    assert t["name"][0] == "cpu-50k_U32.77K_ep1_wd0.1"
    # File order: the first grid key varies slowest, the zip group fastest.
    assert t["model.preset"].to_list() == ["cpu-50k"] * 6 + ["cpu-250k"] * 6
    assert t["data.epochs"].to_list()[:3] == [1.0, 2.0, 4.0]
    assert plan_summary(plan).startswith("12 runs · ")


SMALL = """\
name: s
base:
  model: {preset: cpu-50k}
  data: {dataset: /nonexistent/x, vocab_size: 256, unique_tokens: 4096, seq_len: 32}
  train: {batch_size: 8}
"""


def small(extra: str = "", **facts):
    return parse_spec(SMALL + textwrap.dedent(extra), file="s.yaml")


def test_seeds_and_members():
    plan = expand(small("seeds: [0, 10]\nmembers: 3\n"))
    t = plan.table
    assert t.height == 6
    assert t["seed"].to_list() == [0, 0, 0, 10, 10, 10]
    assert t["member"].to_list() == [0, 1, 2, 0, 1, 2]
    assert [c.train.init_seed for c in plan.configs] == [0, 1, 2, 10, 11, 12]
    assert [c.data.seed for c in plan.configs] == [0, 1, 2, 10, 11, 12]
    assert t["name"].to_list()[:2] == ["s0_m0", "s0_m1"]
    members_only = expand(small("members: 2\n"))
    assert [c.train.init_seed for c in members_only.configs] == [0, 1]


def test_derive_tokens_per_parameter_rounds_to_int():
    plan = expand(small("derive:\n  data.unique_tokens: 20 * N\n"))
    (cfg,) = plan.configs
    n = plan.table["N"][0]
    assert cfg.data.unique_tokens == 20 * n and isinstance(cfg.data.unique_tokens, int)
    assert plan.table["D_unique"][0] == (20 * n) // 32 * 32


def test_duplicate_run_ids_are_an_error():
    with pytest.raises(UserError, match="same identity .*differ only in operational fields"):
        expand(small("grid:\n  train.eval_every: [10, 20]\n"))


def test_rule_errors_during_expand_name_line_and_run():
    spec = small("grid:\n  model.preset: [cpu-100k, cpu-50k]\n"
                 "derive:\n  optim.lr: 1e-3 / (model.d_model - 32)\n")
    with pytest.raises(UserError) as info:
        expand(spec)
    message = str(info.value)
    assert message.startswith("s.yaml:9: derive.optim.lr: run 'cpu-50k':")
    assert "division by zero" in message


def test_unknown_vocab_is_a_clear_error():
    spec = parse_spec(SMALL.replace("vocab_size: 256, ", ""), file="s.yaml")
    with pytest.raises(UserError, match="set data.vocab_size in base"):
        expand(spec)


def test_bad_values_surface_as_user_errors():
    with pytest.raises(UserError, match="s.yaml:.*data.epochs"):
        expand(small("grid:\n  data.epochs: [0]\n"))
    with pytest.raises(UserError, match="model.preset"):
        expand(small("grid:\n  model.preset: [nope]\n"))


def test_gpu_hours_from_token_throughput():
    plan = expand(small("launcher: {throughput_tokens_per_gpu_s: 1000}\n"))
    assert plan.table["gpu_hours"][0] == pytest.approx(plan.table["D_total"][0] / 1000 / 3600)
    assert expand(small()).table["gpu_hours"].is_null().all()


def test_render_with_decisions():
    plan = expand(small("grid:\n  optim.lr: [1e-3, 3e-3, 1e-2]\n"))
    decisions = pl.DataFrame({"run_id": plan.table["run_id"],
                              "action": ["launch", "skip", "launch"],
                              "reason": ["new", "completed", "preempted: resume"]})
    console = Console(record=True, width=220)
    console.print(render_plan(plan, decisions))
    text = console.export_text()
    assert "completed" in text and "launch 2, skip 1" in text and "3 runs" in text
    assert all(rid in text for rid in plan.table["run_id"])
    console = Console(record=True, width=220)
    console.print(render_plan(plan, max_rows=2))
    assert "(1 more runs)" in console.export_text()


def test_fast_identity_equals_the_definition():
    """identity.full_id caches per-section JSON; it must equal sha256(canonical_json(...))."""
    plan = expand(load_spec(SWEEPS / "200M_tokens_scion.yaml"))
    configs = plan.configs[::37] + [
        RunConfig(), RunConfig(optim=OptimConfig(lr=1)), RunConfig(optim=OptimConfig(lr=1.0)),
        RunConfig(optim=OptimConfig(lr=True)), RunConfig(extra={"b": 1, "a": [1, 2.0]}),
    ]
    for cfg in configs + configs[::-1]:
        slow = hashlib.sha256(canonical_json(identity_dict(cfg)).encode()).hexdigest()
        assert full_id(cfg) == slow
    ids = {full_id(c) for c in configs[-4:-1]}
    assert len(ids) == 3  # 1, 1.0 and True are different identities


def test_shape_rules_apply_before_rules_that_read_N():
    from scalelab.model.counts import param_counts
    from scalelab.model.presets import resolve_shape

    plan = expand(small("derive:\n  data.unique_tokens: 20 * N\n  model.d_ff: 4 * model.d_model\n"))
    (cfg,) = plan.configs
    assert cfg.model.d_ff == 4 * 32
    n = param_counts(resolve_shape(cfg.model), 256).total
    assert cfg.data.unique_tokens == 20 * n and plan.table["N"][0] == n
