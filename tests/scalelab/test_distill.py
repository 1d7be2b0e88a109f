"""Distillation: KV-cached sampling, deterministic teacher generation, the content-hashed
cache, the real/synthetic mixture ratio, and the logit-KD term."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from _waits import CEILING_S

from scalelab import strict
from scalelab.config import DataConfig, ModelConfig, RunConfig
from scalelab.data.format import write_token_dir
from scalelab.distill.decode import CachedDecoder, sample_batch
from scalelab.distill.generate import GenerationParams, assign_members, generate, generate_tokens
from scalelab.distill.kd import TeacherEnsemble, kd_kl, kd_loss
from scalelab.distill.mixture import MixtureStream, open_synthetic, split_batch
from scalelab.model import build_model
from scalelab.store.atomic import write_yaml_atomic
from scalelab.store.status import State, update_status
from scalelab.train.checkpoint.directory import save_checkpoint


def _model(seed: int, preset: str = "cpu-50k", **kw) -> torch.nn.Module:
    m = build_model(ModelConfig(preset=preset, **kw), vocab_size=64)
    m.init_weights(seed=seed, std=0.2)  # large std: peaked, member-specific distributions
    return m.eval()


@pytest.mark.parametrize("kv_heads", [None, 1])
def test_cached_decoding_equals_full_forward(kv_heads):
    model = _model(0, n_kv_heads=kv_heads, n_heads=2)
    idx = torch.randint(0, 64, (3, 12), generator=torch.Generator().manual_seed(1))
    full = model(idx)  # [3, 12, 64]
    dec = CachedDecoder(model, 3, 12)
    parts = [dec.forward(idx[:, :5], 0)] + [dec.forward(idx[:, t : t + 1], t) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)


def test_sampling_is_deterministic_and_follows_the_model():
    model = _model(0)
    prompt = torch.randint(0, 64, (64, 1), generator=torch.Generator().manual_seed(2))
    a = sample_batch(model, prompt, 9, torch.Generator().manual_seed(5))
    b = sample_batch(model, prompt, 9, torch.Generator().manual_seed(5))
    c = sample_batch(model, prompt, 9, torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(a[:, :1], prompt)
    # The samples are the model's: their mean NLL under the sampler is far below log V = 4.16
    # (a uniform sampler) and near the model's own entropy (within 0.3 nats, 64x8 tokens).
    with torch.no_grad():
        logp = torch.log_softmax(model(a[:, :-1]), -1)
    nll = -logp.gather(-1, a[:, 1:, None]).mean().item()
    entropy = -(logp.exp() * logp).sum(-1).mean().item()
    assert nll < math.log(64) - 0.5
    assert abs(nll - entropy) < 0.3


def test_pooled_mixture_assigns_members_uniformly_and_reproducibly():
    a = assign_members(4000, 4, seed=3)
    assert np.array_equal(a, assign_members(4000, 4, seed=3))
    assert not np.array_equal(a, assign_members(4000, 4, seed=4))
    counts = np.bincount(a, minlength=4)
    assert np.all(np.abs(counts - 1000) < 4 * math.sqrt(1000 * 0.75))  # 4 sigma binomial


def test_each_sequence_comes_from_its_assigned_member():
    models = [_model(s) for s in (0, 1)]
    params = GenerationParams(n_tokens=40 * 9, seq_len=8, seed=0, batch_size=7)
    assign = assign_members(params.n_sequences, 2, 0)
    prompts = np.random.default_rng(0).integers(0, 64, (params.n_sequences, 1))
    seqs = torch.as_tensor(generate_tokens(models, prompts, assign, params, torch.device("cpu")))
    with torch.no_grad():
        ll = torch.stack([
            torch.log_softmax(m(seqs[:, :-1]), -1).gather(-1, seqs[:, 1:, None]).sum((1, 2)) for m in models
        ])  # [2, n] log-likelihood of each sequence under each member
    # Peaked, distinct members: the sampling member explains its sequence better, nearly always.
    assert (ll.argmax(0).numpy() == assign).mean() > 0.9


def _teacher_run(root, name: str, seed: int, dataset: str):
    cfg = RunConfig(
        name=name,
        model=ModelConfig(preset="cpu-50k"),
        data=DataConfig(dataset=dataset, seq_len=8, val_tokens=200),
    )
    run_dir = root / "runs" / name
    write_yaml_atomic(run_dir / "config.yaml", strict.to_dict(cfg))
    save_checkpoint(run_dir, 1, {"model": _model(seed).state_dict(), "step": 1})
    update_status(run_dir, State.COMPLETED)
    return run_dir


@pytest.fixture
def corpus(tmp_path):
    toks = np.random.default_rng(0).integers(0, 64, 4000)
    return str(write_token_dir(tmp_path / "corpus", toks, vocab_size=64, tokenizer_id="test", eos_id=None,
                               n_documents=1, sources=["rng"]))


def test_generation_is_deterministic_content_hashed_and_cached(tmp_path, corpus):
    teachers = [_teacher_run(tmp_path, f"m{k}", k, corpus) for k in range(2)]
    params = GenerationParams(n_tokens=30 * 9, seq_len=8, seed=1, batch_size=16)
    logs = []
    out = generate(teachers, params, tmp_path / "syn", log=logs.append)
    tokens = np.fromfile(out / "tokens.bin", dtype="<u2")
    assert tokens.size == 30 * 9 and "generating" in logs[0]
    # Cache hit: same teachers and parameters -> same directory, nothing regenerated.
    mtime = (out / "tokens.bin").stat().st_mtime_ns
    assert generate(teachers, params, tmp_path / "syn", log=logs.append) == out
    assert "cached" in logs[-1] and (out / "tokens.bin").stat().st_mtime_ns == mtime
    # Deterministic: a fresh cache with the same seed holds the same tokens.
    again = generate(teachers, params, tmp_path / "syn2", log=logs.append)
    assert again.name == out.name
    assert np.array_equal(np.fromfile(again / "tokens.bin", dtype="<u2"), tokens)
    # Another seed or another teacher set is another file.
    other = generate(teachers, GenerationParams(n_tokens=30 * 9, seq_len=8, seed=2, batch_size=16), tmp_path / "syn",
                     log=logs.append)
    single = generate(teachers[:1], params, tmp_path / "syn", log=logs.append)
    assert len({out.name, other.name, single.name}) == 3
    assert not np.array_equal(np.fromfile(other / "tokens.bin", dtype="<u2"), tokens)


def test_mixture_ratio_is_exact_per_batch(tmp_path, corpus):
    from scalelab.data import open_dataset

    real = open_dataset(DataConfig(dataset=corpus, seq_len=8, val_tokens=200))
    # Synthetic tokens all >= 64 - 8 and real ones drawn from [0, 56): rows are told apart by value.
    syn_tokens = np.random.default_rng(1).integers(56, 64, 50 * 9)
    real_tokens = np.asarray(real.train) % 56
    write_token_dir(tmp_path / "real", np.concatenate([real_tokens, np.asarray(real.val)]), vocab_size=64,
                    tokenizer_id="test", eos_id=None, n_documents=1, sources=["r"])
    write_token_dir(tmp_path / "syn", syn_tokens, vocab_size=64, tokenizer_id="test", eos_id=None, n_documents=50,
                    sources=["s"], extra={"sequence_length": 9})
    cfg = DataConfig(dataset=str(tmp_path / "real"), seq_len=8, val_tokens=200, unique_tokens=8 * 40, epochs=4)
    stream = MixtureStream(open_dataset(cfg), open_synthetic(tmp_path / "syn", 8), cfg, 20, 0.75)
    assert (stream.n_real, stream.n_syn) == (5, 15) and stream.weight == 0.75
    # Real data still runs E = 4 passes over U = 40 sequences at 5 real rows per step.
    assert stream.total_steps == 40 * 4 // 5
    syn_rows = 0
    for step in range(stream.total_steps):
        x, y = stream.batch(step)
        is_syn = (x >= 56).all(1)
        assert int(is_syn.sum()) == 15 and bool((x[~is_syn] < 56).all())
        syn_rows += int(is_syn.sum())
    assert syn_rows / (stream.total_steps * 20) == 0.75
    assert stream.epoch_at(stream.total_steps) == pytest.approx(4.0)
    assert torch.equal(stream.batch(3)[0], stream.batch(3)[0])  # pure in step
    assert torch.equal(stream.batch(3, slice(5, 20))[0], stream.batch(3)[0][5:20])


def test_split_batch_rounds_and_refuses_empty_parts():
    assert split_batch(16, 0.9) == (2, 14)
    assert split_batch(64, 0.9) == (6, 58)  # 57.6 -> 58 rows: realised w = 0.906
    with pytest.raises(Exception, match="synthetic_weight"):
        split_batch(4, 0.95)


def test_kd_kl_matches_a_direct_computation_and_vanishes_at_the_teacher():
    g = torch.Generator().manual_seed(0)
    s = torch.randn(2, 3, 7, generator=g)
    t_logits = torch.randn(2, 2, 3, 7, generator=g)  # [K, B, T, V]
    teacher = torch.log_softmax(t_logits.mean(0), -1)
    p_t = teacher.exp().double()
    want = (p_t * (p_t.log() - torch.log_softmax(s.double(), -1))).sum(-1).mean()
    torch.testing.assert_close(kd_kl(s, teacher).double(), want, atol=1e-6, rtol=0)
    assert kd_kl(t_logits.mean(0), teacher).abs() < 1e-6
    total, ce, kl = kd_loss(s, torch.zeros(2, 3, dtype=torch.long), teacher, alpha=0.25)
    torch.testing.assert_close(total, 0.75 * ce + 0.25 * kl)


def test_teacher_ensemble_is_frozen_logit_average():
    models = [_model(0), _model(1)]
    ens = TeacherEnsemble(models).train()
    idx = torch.randint(0, 64, (2, 5))
    want = torch.log_softmax((models[0](idx) + models[1](idx)) / 2, -1)
    torch.testing.assert_close(ens(idx), want)
    assert not ens.training and not any(p.requires_grad for p in ens.parameters())


TINY_STUDY = """
name: tiny_distill
base:
  model: {preset: cpu-50k}
  data: {dataset: DATASET, seq_len: 8, unique_tokens: 256, epochs: 1, val_tokens: 200, subset_seed: 0}
  train: {batch_size: 8, eval_every: 0, eval_batches: 2, norms_every: 0, checkpoint_every: 1000, device: cpu}
launcher: {executor: debug}
blocks:
  - name: teachers
    members: 2
  - name: student
    base:
      distill: {teacher: {member: 0, distill.synthetic_weight: 0.0}, synthetic_weight: 0.5, synthetic_tokens: 180}
  - name: kd
    base:
      distill: {teacher: {data.seed: 1}, kd_weight: 0.5}
"""


def test_sweep_runs_teachers_then_generation_then_students(tmp_path, corpus):
    """Blocks expand into teachers and students; the staged launch orders them (debug
    backend, the local twin of Slurm's afterok) and the ensemble/self teachers resolve."""
    import json

    import polars as pl

    from scalelab.cli import main
    from scalelab.sweep.plan.expand import load_plan

    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_STUDY.replace("DATASET", corpus))
    plan = load_plan(spec)
    assert plan.table["block"].to_list() == ["teachers", "teachers", "student", "kd"]
    teachers = plan.table["run_dir"].to_list()[:2]
    student, kd = plan.configs[2], plan.configs[3]
    assert student.distill.teachers == (teachers[0].removeprefix("runs/"),)
    assert kd.distill.teachers == (teachers[1].removeprefix("runs/"),)  # member 1: data.seed 0 + 1
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", str(spec), "--root", str(tmp_path / "root")])
    assert exit_.value.code == 0
    sweep = tmp_path / "root" / "tiny_distill"
    status = {d: json.loads((sweep / d / "status.json").read_text()) for d in plan.table["run_dir"]}
    assert {s["state"] for s in status.values()} == {"COMPLETED"}
    (gen,) = list((sweep / "generate").iterdir())
    gen_status = json.loads((gen / "status.json").read_text())
    assert gen_status["state"] == "COMPLETED"
    # Order on disk: teachers finished <= generation started; generation finished <= student started.
    assert max(status[t]["finished"] for t in teachers) <= gen_status["started"]
    assert gen_status["finished"] <= status[plan.table["run_dir"][2]]["started"]
    synthetic = json.loads((gen / "result.json").read_text())["synthetic"]
    assert json.loads((Path(synthetic) / "meta.json").read_text())["n_tokens"] == 20 * 9
    # The student trained on the mixture: steps = U·E / (batch · (1 - w)) = 32 / 4 = 8.
    evals = pl.read_parquet(sweep / plan.table["run_dir"][2] / "evals.parquet")
    assert evals["step"].max() == 8 == plan.table["steps"][2]
    # Relaunching is a no-op: everything (generation included) is complete.
    with pytest.raises(SystemExit):
        main(["sweep", str(spec), "--root", str(tmp_path / "root")])
    assert json.loads((gen / "status.json").read_text())["updated"] == gen_status["updated"]


def _poison(run_dir: Path, marker: Path) -> Path:
    """Replace a teacher's checkpoint by one whose pickle calls os.system (manifest matching)."""
    import shutil

    from _train_util import write_malicious_checkpoint

    shutil.rmtree(run_dir / "checkpoint")
    return write_malicious_checkpoint(run_dir, 1, marker)


def test_generation_refuses_a_teacher_checkpoint_that_would_run_code_in_one_line(tmp_path, corpus):
    from scalelab.errors import UserError

    teacher = _teacher_run(tmp_path, "m0", 0, corpus)
    marker = tmp_path / "code-ran"
    state_file = _poison(teacher, marker)
    with pytest.raises(UserError) as err:
        generate([teacher], GenerationParams(n_tokens=10 * 9, seq_len=8), tmp_path / "syn", log=lambda _: None)
    assert "\n" not in str(err.value) and not marker.exists()
    assert str(err.value).startswith(f"{state_file.parent}: corrupt checkpoint (state.pt: pickle refused")


def test_kd_student_cli_exits_2_in_one_line_on_a_code_running_teacher(tmp_path, corpus):
    """``scalelab train`` on a logit-KD student whose teacher (an absolute path in the spec)
    holds a code-running pickle: exit 2, one line on stderr, no traceback, no code run."""
    import subprocess
    import sys

    import yaml

    from scalelab.config import DistillConfig, TrainConfig

    teacher = _teacher_run(tmp_path, "m0", 0, corpus)
    marker = tmp_path / "code-ran"
    state_file = _poison(teacher, marker)
    student = RunConfig(
        name="kd", model=ModelConfig(preset="cpu-50k"),
        data=DataConfig(dataset=corpus, seq_len=8, val_tokens=200),
        train=TrainConfig(batch_size=4, eval_batches=2),
        distill=DistillConfig(teachers=(str(teacher.resolve()),), kd_weight=0.5),
    )
    cfg_yaml = tmp_path / "kd.yaml"
    cfg_yaml.write_text(yaml.safe_dump(strict.to_dict(student), sort_keys=False))
    proc = subprocess.run(
        [sys.executable, "-m", "scalelab", "train", str(cfg_yaml), "--run-dir", str(tmp_path / "kd")],
        capture_output=True, text=True, timeout=CEILING_S, check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(f"error: {state_file.parent}: corrupt checkpoint (state.pt: pickle refused")
    assert not marker.exists()
