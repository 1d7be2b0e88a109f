"""The masked-diffusion objective ('mdm'): its loss is the continuous-time ELBO, its masking
draws are deterministic, its attention is bidirectional, and it trains and resumes like AR.

The ELBO references are computed independently of ``scalelab.model.masking``:

* in closed form: with the linear schedule, a mask set M of k tokens has probability
  t^k (1 - t)^(T - k) at time t, so the t-integral of the 1/t-weighted loss gives each M
  the weight B(k, T - k + 1) (a Beta function);
* numerically, by scipy's quad of the 1/t-weighted Bernoulli expectation over t.
"""

from __future__ import annotations

import itertools
import math

import polars as pl
import pytest
import torch
from _train_util import make_token_dir, tiny_cfg

from scalelab.config import load_run_config
from scalelab.derive import derive
from scalelab.errors import UserError
from scalelab.identity import full_id
from scalelab.model import build_model, param_counts, resolve_shape
from scalelab.model.llama import Llama
from scalelab.model.masking import eval_draws, train_draw
from scalelab.model.shape import ModelShape
from scalelab.store.status import State
from scalelab.train import train

TOL = 1e-6  # fp64 model: the estimator's exact expectation against the closed form


def _tiny(vocab: int, objective: str, seed: int = 0, tie: bool = False) -> Llama:
    shape = ModelShape(d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=16, tie_embeddings=tie)
    model = Llama(shape, vocab, objective=objective)
    model.init_weights(seed=seed, std=0.5)
    return model.double()


def _per_position_ce(model: Llama, x: torch.Tensor, masked: tuple[int, ...]) -> torch.Tensor:
    """-log p(x_i | x with ``masked`` positions masked), every position i: [T] fp64."""
    z = x.clone()
    z[0, list(masked)] = model.mask_id
    with torch.no_grad():
        logp = torch.log_softmax(model(z)[0].double(), dim=-1)  # [T, V]
    return -logp[torch.arange(x.shape[1]), x[0]]


def _closed_form_elbo(model: Llama, x: torch.Tensor) -> float:
    """ELBO per token: sum over mask sets M of B(|M|, T - |M| + 1) · sum_{i in M} CE_i(M), / T."""
    T = x.shape[1]
    total = 0.0
    for k in range(1, T + 1):
        beta = math.gamma(k) * math.gamma(T - k + 1) / math.gamma(T + 1)
        for masked in itertools.combinations(range(T), k):
            total += beta * float(_per_position_ce(model, x, masked)[list(masked)].sum())
    return total / T


def test_mdm_loss_is_the_hand_computed_elbo_on_a_two_token_vocabulary():
    """V = 2, T = 2. By hand: the two single masks each weigh B(1, 2) = 1/2 and the full mask
    B(2, 1) = 1/2, so ELBO/T = (CE_1({1}) + CE_2({2}) + CE_1({1,2}) + CE_2({1,2})) / 4. The
    loss's expectation over its draws (k uniform on {1, 2}, then a uniform k-subset, weight
    T/k) must equal it, and so must the t-integral of the 1/t-weighted Bernoulli form."""
    from scipy.integrate import quad

    torch.manual_seed(0)
    model = _tiny(2, "mdm")
    x = torch.tensor([[1, 0]])
    ce = {m: _per_position_ce(model, x, m) for m in [(0,), (1,), (0, 1)]}
    by_hand = float(ce[(0,)][0] + ce[(1,)][1] + ce[(0, 1)][0] + ce[(0, 1)][1]) / 4
    assert _closed_form_elbo(model, x) == pytest.approx(by_hand, rel=TOL)

    # the loss, exactly in expectation over scalelab's draws: P(k) = 1/T, P(M | k) = 1/C(T, k)
    T = 2
    expected = 0.0
    for k in (1, 2):
        for masked in itertools.combinations(range(T), k):
            z = x.clone()
            z[0, list(masked)] = model.mask_id
            w = torch.zeros(1, T, dtype=torch.float64)
            w[0, list(masked)] = T / k
            with torch.no_grad():
                loss = float(model(z, targets=x, weights=w))
            expected += loss / T / math.comb(T, k)
    assert expected == pytest.approx(by_hand, rel=TOL)

    # the 1/t form of the issue: each token masked w.p. t, weight 1/t, integrated over t
    def integrand(t: float) -> float:
        out = 0.0
        for bits in itertools.product((0, 1), repeat=T):
            masked = tuple(i for i in range(T) if bits[i])
            if not masked:
                continue
            prob = math.prod(t if b else 1 - t for b in bits)
            out += prob / t * float(ce[masked][list(masked)].sum()) / T
        return out

    assert quad(integrand, 0, 1)[0] == pytest.approx(by_hand, rel=1e-8)


def test_the_training_draws_average_to_the_elbo():
    """Monte Carlo over 4000 training draws of a T = 5 sequence: the mean loss lies within 4
    SE of the closed-form ELBO (a biased estimator, e.g. weights t instead of 1/t, misses by
    > 20 SE here)."""
    model = _tiny(3, "mdm", seed=1)
    x = torch.tensor([[2, 0, 1, 1, 2]])
    truth = _closed_form_elbo(model, x)
    losses = []
    for step in range(4000):
        z, w = train_draw(x, seed=3, step=step, rows=slice(0, 1), global_rows=1, mask_id=model.mask_id)
        with torch.no_grad():
            losses.append(float(model(z, targets=x, weights=w.double())))
    mean = sum(losses) / len(losses)
    se = math.sqrt(sum((v - mean) ** 2 for v in losses) / (len(losses) - 1) / len(losses))
    assert abs(mean - truth) < 4 * se, (mean, truth, se)


def test_each_eval_draw_is_unbiased_and_the_strata_cover_every_row():
    model = _tiny(3, "mdm", seed=2)
    x = torch.tensor([[2, 0, 1, 1, 2, 0]])
    truth = _closed_form_elbo(model, x)
    K = 6
    per_draw = []
    for b in range(400):
        draws = eval_draws(x, batch_index=b, n_draws=K, rows=slice(0, 1), global_rows=1,
                           mask_id=model.mask_id)
        counts = sorted(int((z == model.mask_id).sum()) for z, _ in draws)
        # stratified: with K = T, stratum s holds ratios [s/T, (s+1)/T), i.e. k = s + 1, so
        # each row's draws mask 1, 2, ..., T tokens, each once
        assert counts == list(range(1, 7)), counts
        with torch.no_grad():
            per_draw.append([float(model(z, targets=x, weights=w.double())) for z, w in draws])
    for j in range(K):  # each draw index alone is unbiased
        vals = [row[j] for row in per_draw]
        mean = sum(vals) / len(vals)
        se = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) / len(vals))
        assert abs(mean - truth) < 4 * se, (j, mean, truth, se)


def test_masking_draws_are_deterministic_per_seed_step_and_batch():
    x = torch.arange(40).reshape(4, 10) % 7
    a = train_draw(x, seed=5, step=11, rows=slice(0, 4), global_rows=4, mask_id=7)
    b = train_draw(x, seed=5, step=11, rows=slice(0, 4), global_rows=4, mask_id=7)
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    other_step = train_draw(x, seed=5, step=12, rows=slice(0, 4), global_rows=4, mask_id=7)
    other_seed = train_draw(x, seed=6, step=11, rows=slice(0, 4), global_rows=4, mask_id=7)
    assert not torch.equal(a[0], other_step[0]) and not torch.equal(a[0], other_seed[0])
    # two ranks' rows are the single process's rows: sharding-independent
    halves = [train_draw(x[r], seed=5, step=11, rows=r, global_rows=4, mask_id=7)
              for r in (slice(0, 2), slice(2, 4))]
    assert torch.equal(torch.cat([h[0] for h in halves]), a[0])
    assert torch.equal(torch.cat([h[1] for h in halves]), a[1])
    # eval draws: the same at every call (every eval, every run), different per batch
    e1 = eval_draws(x, batch_index=3, n_draws=4, rows=slice(0, 4), global_rows=4, mask_id=7)
    e2 = eval_draws(x, batch_index=3, n_draws=4, rows=slice(0, 4), global_rows=4, mask_id=7)
    e3 = eval_draws(x, batch_index=4, n_draws=4, rows=slice(0, 4), global_rows=4, mask_id=7)
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(e1, e2))
    assert not all(torch.equal(p[0], q[0]) for p, q in zip(e1, e3))
    # weights: T/k on the k masked positions, 0 elsewhere
    z, w = a
    for row in range(4):
        k = int((z[row] == 7).sum())
        assert 1 <= k <= 10
        assert torch.equal(w[row] > 0, z[row] == 7)
        assert torch.allclose(w[row][w[row] > 0], torch.tensor(10 / k))


@pytest.mark.parametrize("objective", ["ar", "mdm"])
def test_attention_is_causal_for_ar_and_bidirectional_for_mdm(objective):
    """Change the token at position 5 of 8: AR's logits at positions 0..4 stay bit-equal;
    MDM's change (each position sees the whole sequence)."""
    model = _tiny(11, objective, seed=4).float()
    x = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    y = x.clone()
    y[0, 5] = 9
    with torch.no_grad():
        before, after = model(x)[0, :5], model(y)[0, :5]
    if objective == "ar":
        assert torch.equal(before, after)
    else:
        assert (before - after).abs().amax(dim=-1).min() > 1e-6  # every earlier position moves


def test_mdm_model_shape_counts_and_identity():
    cfg = load_run_config(None, ["model.preset=cpu-50k", "model.objective=mdm"])
    model = build_model(cfg.model, vocab_size=256)
    assert model.tok_emb.weight.shape[0] == 257 and model.lm_head.weight.shape[0] == 256
    counts = param_counts(resolve_shape(cfg.model), 256, mask_token=True)
    assert counts.total == sum(p.numel() for p in model.parameters())
    assert derive(cfg, vocab_size=256, train_tokens_available=10**6).n_params == counts.total
    tied = _tiny(5, "mdm", tie=True)
    assert tied.head_weight().shape == (5, 8) and tied.lm_head is None
    assert param_counts(tied.shape, 5, mask_token=True).total == sum(p.numel() for p in tied.parameters())
    # 'ar' keeps the id it had before the objective existed; 'mdm' is a new run
    ar = load_run_config(None, ["model.preset=cpu-50k"])
    assert full_id(ar) == full_id(load_run_config(None, ["model.preset=cpu-50k", "model.objective=ar"]))
    assert full_id(ar) != full_id(cfg)


def test_mdm_refuses_distillation_in_one_line():
    with pytest.raises(UserError, match="masked-diffusion student"):
        load_run_config(None, ["model.objective=mdm", "distill.kd_weight=0.5"])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dir(tmp_path_factory.mktemp("tok") / "tokens")


def test_mdm_trains_its_validation_elbo_falls_with_an_se(data, tmp_path):
    """``scalelab train sweeps/examples/train_cpu.yaml model.objective=mdm`` (tiny overrides)."""
    import subprocess
    import sys

    from _train_util import REPO, cli_env, tiny_overrides
    from _waits import CEILING_S

    run = tmp_path / "run"
    args = [sys.executable, "-m", "scalelab", "train", str(REPO / "sweeps/examples/train_cpu.yaml"),
            *tiny_overrides(data, 40), "model.objective=mdm", "train.eval_every=20", "optim.lr=1e-2",
            "--run-dir", str(run)]
    done = subprocess.run(args, env=cli_env(), capture_output=True, text=True, timeout=CEILING_S)
    assert done.returncode == 0, done.stdout + done.stderr
    evals = pl.read_parquet(run / "evals.parquet").sort("step")
    assert evals["step"].to_list() == [0, 20, 40]
    losses, ses = evals["loss"].to_list(), evals["loss_se"].to_list()
    assert losses[0] > math.log(256) - 0.5  # near the uniform predictor's ln V at init
    assert losses[-1] < losses[0] - 4 * max(ses[0], ses[-1]) - 0.3, (losses, ses)
    assert all(0 < s < 0.5 for s in ses)


def test_an_mdm_ensemble_scores_the_runs_own_elbo_draws(data, tmp_path):
    """Two 'mdm' members: each member alone, re-scored by the ensemble evaluator, gives its
    run's own final validation ELBO (the same seeded draws; 1e-5 for the summation order),
    and the probability-averaged 2-ensemble is below the mean member (Jensen)."""
    from scalelab.ensemble.evaluate import EnsembleGroup, evaluate_group

    dirs = []
    for member in (0, 1):
        cfg = tiny_cfg(data, 12, "model.objective=mdm", "train.eval_every=0", f"member={member}")
        dirs.append(tmp_path / f"m{member}")
        assert train(cfg, dirs[-1]) == State.COMPLETED
    rows = evaluate_group(EnsembleGroup("g", "g", tuple(dirs), (0, 1)), methods=("probs",), device="cpu")
    alone = rows.filter(pl.col("method") == "member").sort("member")["loss"].to_list()
    own = [pl.read_parquet(d / "evals.parquet").sort("step")["loss"][-1] for d in dirs]
    assert alone == pytest.approx(own, rel=1e-5)
    ens = rows.filter((pl.col("method") == "probs") & (pl.col("members") == 2))["loss"].item()
    assert ens < sum(alone) / 2


def test_kill_9_resume_of_an_mdm_run_is_bit_identical(data, tmp_path):
    """SIGKILL after a checkpoint, relaunch: the final weights, optimizer state, every
    metric and every eval (ELBO and its SE) equal an uninterrupted run's bit for bit (the
    masks of step i depend on (seed, i) only)."""
    from _train_util import assert_tensors_equal, final_state, kill_9_and_resume

    cfg = tiny_cfg(data, 40, "model.objective=mdm", "train.checkpoint_every=4",
                   "train.eval_every=10", "train.norms_every=10", "train.schedule=wsd")
    ref, run_dir = kill_9_and_resume(cfg, tmp_path)
    got, want = final_state(run_dir), final_state(ref)
    assert_tensors_equal(got["model"], want["model"], "model")
    assert_tensors_equal(got["optimizer"]["state"], want["optimizer"]["state"], "optimizer")
    for table in ("metrics", "evals"):
        a = pl.read_parquet(run_dir / f"{table}.parquet").drop("step_time_s", strict=False)
        b = pl.read_parquet(ref / f"{table}.parquet").drop("step_time_s", strict=False)
        assert a.equals(b), table


def test_weighted_chunked_loss_equals_the_plain_weighted_loss():
    """The chunked head (no [n, V] logits) with per-token weights: the same loss and
    gradients as the weighted cross-entropy of full fp64 logits (1e-12), and the plain
    path (fp32 logits) to fp32 precision."""
    from scalelab.model.chunked_loss import chunked_cross_entropy, cross_entropy

    gen = torch.Generator().manual_seed(0)
    h = torch.randn(37, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(11, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    t = torch.randint(0, 11, (37,), generator=gen)
    weights = torch.rand(37, dtype=torch.float64, generator=gen) * (torch.rand(37, generator=gen) < 0.5)
    a = chunked_cross_entropy(h, w, t, chunk_tokens=5, weights=weights)
    ga = torch.autograd.grad(a, (h, w))
    b = (torch.nn.functional.cross_entropy(h @ w.T, t, reduction="none") * weights).mean()
    gb = torch.autograd.grad(b, (h, w))
    assert float(a) == pytest.approx(float(b), rel=1e-12)
    for x, y in zip(ga, gb):
        assert torch.allclose(x, y, rtol=1e-12, atol=1e-14)
    assert float(cross_entropy(h @ w.T, t, weights)) == pytest.approx(float(b), rel=1e-6)
    assert float(cross_entropy(h @ w.T, t)) != pytest.approx(float(b), rel=1e-3)  # weights used


@pytest.mark.parametrize("path", ["plain", "chunked"])
def test_the_model_scores_only_masked_positions_and_keeps_the_full_loss(path, monkeypatch):
    """``Llama(z, targets=x, weights=w)`` computes the head on the rows of nonzero weight only
    (about half the logits: k is uniform on 1..T), and equals the weighted mean over every
    position of the full fp64 logits: the chunked path (chunks of 5 rows, fp64 sums) to 1e-12
    in the loss and 1e-10 in the gradients; the plain path takes fp32 logits by design
    (``cross_entropy``), so fp32 precision: 1e-6 and 1e-5."""
    import scalelab.model.chunked_loss as chunked
    from scalelab.model import memory

    if path == "chunked":
        monkeypatch.setattr(memory, "PLAIN_LOSS_MAX_LOGITS", 0)
        monkeypatch.setattr(chunked, "CHUNK_TOKENS", 5)
    model = _tiny(11, "mdm", seed=3)
    x = torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(1))
    z, weights = train_draw(x, seed=0, step=4, rows=slice(0, 3), global_rows=3, mask_id=model.mask_id)
    scored: list[int] = []
    real_linear = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear", lambda a, b, *r: (scored.append(a.shape[0]),
                                                                            real_linear(a, b, *r))[1])
    loss = model(z, targets=x, weights=weights)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    monkeypatch.setattr(torch.nn.functional, "linear", real_linear)
    h = model.tok_emb(z)  # the forward pass by hand, to fp64 logits of every position
    for layer in model.layers:
        h = layer(h, model.rope)
    logits = model.norm_out(h) @ model.head_weight().T  # [B, T, V] fp64
    ref = (torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten(), reduction="none")
           * weights.flatten().double()).mean()
    ref_grads = torch.autograd.grad(ref, list(model.parameters()))
    rel, g_rel, g_abs = (1e-12, 1e-10, 1e-13) if path == "chunked" else (1e-6, 1e-5, 1e-7)
    assert float(loss) == pytest.approx(float(ref), rel=rel)
    for a, b in zip(grads, ref_grads):
        assert torch.allclose(a, b, rtol=g_rel, atol=g_abs)
    masked = int((weights > 0).sum())
    assert 0 < masked < x.numel()
    if path == "plain":
        assert scored[-1] == masked  # the head saw the masked rows only, not all B*T
