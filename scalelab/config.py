"""The run configuration: what one training run is, typed and frozen.

A run is fully described by a ``RunConfig``; ``scalelab train CONFIG.yaml k=v ...`` builds
one strictly (unknown keys are errors) and the sweep planner emits one per plan row.
Derived quantities (N, D, steps, FLOPs) are computed in ``scalelab.derive``, never typed.
Fields marked *operational* never enter the run id (``scalelab.identity``).
Each numeric field declares the values it accepts (``strict.bounded``: the trainer, the
model and the optimizers in ``optim`` rely on them), so a plan refuses what a run would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from scalelab import strict
from scalelab.errors import UserError, did_you_mean

Precision = Literal["fp32", "bf16-autocast", "bf16-pure", "fp8", "mxfp8", "mxfp4", "nvfp4"]
Objective = Literal["ar", "mdm"]
Schedule = Literal["cosine", "wsd", "constant"]

SEED_LIMIT = 2**32
"""Seeds are below 2^32: with the member offset (``scalelab.train.seeds``) they stay
within what torch, numpy and the distillation sampler's seed arithmetic take."""
MEMBER_LIMIT = 10_000
"""Ensemble members are 0..9999: each is a full training run, and a plan holds every run
in memory (a spec's ``members`` is at most this)."""
NS_STEPS_LIMIT = 100
"""Newton-Schulz iterations per optimizer step are at most 100: each multiplies every
hidden matrix three times (a step's optimizer work again), and the published schedules
use 5 (KellerJordan/Muon) to 8 (Polar Express, arXiv 2505.16932); their quintic reaches
its fixed point long before 100."""
ELBO_DRAWS_LIMIT = 256
"""An 'mdm' eval runs the model once per draw over the validation batches: 256 draws cost 256
evals, and put the Monte Carlo SE at 1/16 of one draw's."""
DEVICES = ("auto", "cpu", "cuda")
"""Devices a run trains on (``train.device``) and ``scalelab ensemble --device`` evaluates
on: these, or ``cuda:N`` (GPU N of the node)."""
_CUDA_INDEX = re.compile(r"cuda:[0-9]{1,4}")


def device_problem(name: object) -> str | None:
    """Why ``name`` is not a device of ``DEVICES`` (or ``cuda:N``), in words; None when it is.
    The one rule of ``train.device`` and of ``scalelab ensemble --device``."""
    if isinstance(name, str) and (name in DEVICES or _CUDA_INDEX.fullmatch(name)):
        return None
    return (f"device {name!r} is unknown: expected {', '.join(DEVICES)} or cuda:N"
            f"{did_you_mean(str(name), DEVICES)}")


def val_windows_limit(data: DataConfig) -> int:
    """The most validation windows (sequences of seq_len + 1 tokens) the validation split can
    hold: it is carved to hold between ``val_tokens`` and ``2 · val_tokens`` tokens (so no
    document straddles it; ``scalelab.data.dataset``), at least one window.

    It bounds the held-out batches worth scoring (``train.eval_batches``, ``scalelab ensemble
    --batches``): batch k of b sequences holds windows k·b .. k·b + b - 1 modulo the split's
    W windows (``scalelab.data.stream.val_batches``), so batch k + W is batch k again, and
    more than W batches only repeat earlier ones, at their time and memory."""
    return max(1, 2 * data.val_tokens // (data.seq_len + 1))


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Llama-style decoder shape. Either ``preset`` or the explicit shape fields."""

    preset: str | None = "cpu-1m"
    """Name from ``scalelab.model.presets.PRESETS`` (e.g. 'cpu-50k'..'cpu-5m', '150M',
    '300M', '600M', '1.4B' from Kim et al. 2025, arXiv 2509.14786). Explicit fields below
    override the preset's."""
    d_model: int | None = strict.bounded(None, ge=1)
    """Residual width (hidden size)."""
    n_layers: int | None = strict.bounded(None, ge=1)
    """Transformer blocks."""
    n_heads: int | None = strict.bounded(None, ge=1)
    """Query heads; d_model must divide by it."""
    n_kv_heads: int | None = strict.bounded(None, ge=1)
    """Key/value heads (GQA when < n_heads); defaults to n_heads."""
    d_ff: int | None = strict.bounded(None, ge=1)
    """SwiGLU intermediate width."""
    tie_embeddings: bool = False
    """Share the input embedding and the LM head (untied by default, as in Llama)."""
    rope_theta: float = strict.bounded(10000.0, gt=0)
    """RoPE base frequency (Su et al. 2021)."""
    norm_eps: float = strict.bounded(1e-5, gt=0)
    """RMSNorm epsilon."""
    objective: Objective = "ar"
    """'ar': next-token prediction, causal attention, the exact NLL. 'mdm': a masked-diffusion
    LM on the same decoder (Sahoo et al. 2024, arXiv 2406.07524; Shi et al. 2024, arXiv
    2406.04329): bidirectional attention, a [MASK] token added to the embedding, and the
    continuous-time ELBO as its loss, an upper bound on the NLL (``scalelab.model.masking``;
    docs/diffusion.md). Left out of the run id while 'ar'."""


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Token data and the data-constrained sampling of Muennighoff et al. 2023."""

    dataset: str = "default"
    """A prepared token directory (``scalelab data prepare``) or 'default', the embedded
    corpus built from the running Python's standard-library sources."""
    seq_len: int = strict.bounded(128, ge=1)
    """Tokens per training sequence (the model's context)."""
    unique_tokens: int | None = strict.bounded(None, ge=1)
    """U: the unique-token budget drawn from the training split (None = the whole split)."""
    epochs: float = strict.bounded(1.0, gt=0)
    """E: passes over the U unique tokens; fractional allowed. Total tokens D = U * E."""
    vocab_size: int | None = strict.bounded(None, ge=1)
    """Tokenizer vocabulary; None = read from the dataset header. Set it for plans of
    datasets that are not on this machine (e.g. 128256 for Llama-3's tokenizer)."""
    val_tokens: int = strict.bounded(65536, ge=1)
    """Size of the held-out validation split, carved off before training tokens."""
    seed: int = strict.bounded(0, ge=0, lt=SEED_LIMIT)
    """Data-order seed: which U tokens, and the per-epoch shuffle."""
    subset_seed: int | None = strict.bounded(None, ge=0, lt=SEED_LIMIT)
    """Seed of *which* U tokens only (None = ``seed``). Ensemble members share it, so they
    see the same unique data in different orders (Kim et al. 2025; the planner sets it to
    the replicate seed when ``members`` > 1). Left out of the run id while None."""


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """Optimizer chosen by name through ``scalelab.train.optimizers.REGISTRY``."""

    name: str = "adamw"
    """'adamw' (torch), 'sr-adamw' (optim.AdamW, bf16 + stochastic rounding), 'muon',
    'scion' (see optim/README.md)."""
    lr: float = strict.bounded(3e-3, ge=0)
    """Peak learning rate (for Scion: gamma; for Muon: the Muon-group lr)."""
    weight_decay: float = strict.bounded(0.1, ge=0)
    """Decoupled weight decay, multiplied by the current lr (AdamW convention)."""
    betas: tuple[float, float] = strict.bounded((0.9, 0.95), ge=0, lt=1)
    """Adam (beta1, beta2); also the aux AdamW group of Muon."""
    eps: float = strict.bounded(1e-8, gt=0)
    """Adam epsilon."""
    momentum: float = strict.bounded(0.95, ge=0, lt=1)
    """Muon momentum mu / Scion's 1 - alpha."""
    nesterov: bool = True
    """Nesterov momentum for Muon (U = G + mu*M)."""
    ns_steps: int = strict.bounded(5, ge=1, le=NS_STEPS_LIMIT)
    """Newton-Schulz iterations per Muon/Scion step, at most ``NS_STEPS_LIMIT``."""
    ns_coefficients: str = "jordan"
    """Newton-Schulz preset, e.g. 'jordan' (KellerJordan/Muon) or 'polar_express'
    (Polar Express, arXiv 2505.16932)."""
    muon_scale: Literal["jordan", "spectral", "moonlight"] = "moonlight"
    """Muon shape scaling: KellerJordan/Muon, Scion (arXiv 2502.07529) or Moonlight
    (arXiv 2502.16982)."""
    aux_lr: float | None = strict.bounded(None, ge=0)
    """lr of the AdamW group that Muon routes embeddings/head/gains to (None = lr)."""
    scion_radii: tuple[float, float, float] = strict.bounded((1.0, 3.0, 10.0), gt=0)
    """Scion radii rho for (embedding ColNorm, hidden Spectral, head Sign): the untied
    setting of Pethick et al., arXiv 2502.07529 (LIONS-EPFL/scion)."""
    constrained: bool = False
    """Scion: SCG (True) or unconstrained uSCG (False)."""
    stochastic_rounding: bool = True
    """'sr-adamw', 'muon', 'scion' with bf16 params (train.precision 'bf16-pure'): write the
    fp32 update back to bf16 with stochastic rounding (True) or round-to-nearest (False,
    the ablation: fp32 moments and math, RTN weights; optim/README.md, "SR in practice").
    Left out of the run id while True."""


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """The training loop. Steps are derived: steps = ceil(D / (batch_size * seq_len))."""

    batch_size: int = strict.bounded(16, ge=1)
    """Global batch in sequences (all ranks, all accumulation steps)."""
    micro_batch_size: int | Literal["auto"] | None = strict.bounded(None, ge=1)
    """Per-rank sequences per forward pass (None = batch_size / world_size). 'auto': the
    largest divisor of batch_size / world_size whose predicted peak memory
    (``scalelab.model.memory``) fits 90% of the GPU: the plan's pick uses
    ``launcher.gpu_mem_gb``, the trainer's the GPU it runs on (CPU: the whole batch)."""
    schedule: Schedule = "cosine"
    """'cosine' (warmup, cosine to min_lr_ratio), 'wsd' (warmup-stable-decay), 'constant'."""
    warmup: float = strict.bounded(0.05, ge=0)
    """Warmup length as a fraction of steps (< 1) or a step count (>= 1)."""
    min_lr_ratio: float = strict.bounded(0.0, ge=0, le=1)
    """Final lr / peak lr (Kim et al. decay cosine to 0)."""
    decay_fraction: float = strict.bounded(0.2, ge=0, le=1)
    """WSD: fraction of steps in the final linear decay."""
    grad_clip: float | None = strict.bounded(1.0, gt=0, note="null = no clipping")
    """Clip the global gradient norm to this (None = no clipping)."""
    precision: Precision = "fp32"
    """'fp32'; 'bf16-autocast' (fp32 params, bf16 matmuls); 'bf16-pure' (bf16 params: pair
    with optim.name 'sr-adamw', Zamirai et al. 2020). 'fp8' (E4M3 forward, E5M2 gradients,
    per-tensor scales), 'mxfp8', 'mxfp4' (OCP MX blocks of 32, E8M0 scales), 'nvfp4' (blocks
    of 16, E4M3 scales): fp32 params and non-GEMM compute, the blocks' Linear GEMMs on
    quantized operands, stochastic rounding of FP4 gradients (``scalelab.quant``,
    docs/precision.md; emulated)."""
    init_seed: int = strict.bounded(0, ge=0, lt=SEED_LIMIT)
    """Seed of the weight init (separate from the data-order seed)."""
    init_std: float = strict.bounded(0.02, gt=0)
    """Std of the normal init (output projections scaled by 1/sqrt(2 * n_layers))."""
    loss_ceiling: float | None = strict.bounded(None, gt=0)
    """A train loss above this (for divergence_patience consecutive steps) ends the run
    as DIVERGED; non-finite always does at once. An absolute override: when set, it
    replaces the divergence_factor rule."""
    divergence_factor: float | None = strict.bounded(10.0, gt=1, note="null = off")
    """Without loss_ceiling: a train loss above this times the initial loss ln(vocab size)
    (the uniform predictor's) for divergence_patience consecutive steps ends the run as
    DIVERGED (None = off). Healthy runs stay below 1.01x; lr 1000 without clipping jumps
    to 8e4-4e6x, then goes flat at ln(vocab) (scalelab.train.divergence). Must be > 1."""
    divergence_patience: int = strict.bounded(1, ge=1)
    """Consecutive steps the train loss must stay above the divergence threshold
    (divergence_factor or loss_ceiling). The count restarts at a resume."""
    compile: bool = False
    """Wrap the model in torch.compile (with parallelism 'fsdp': each block). Operational."""
    parallelism: Literal["ddp", "fsdp"] = "ddp"
    """How more than one process shares the model (``scalelab.train.parallel.fsdp``): 'ddp' replicates
    it (DistributedDataParallel: gradients all-reduced); 'fsdp' shards parameters, gradients
    and optimizer state over the ranks (FSDP2 ``fully_shard`` per transformer block, then the
    root; Muon and Scion in their fsdp modes) and checkpoints with torch.distributed.checkpoint
    (one file per rank). One process trains the bare model either way. In fp32 the losses
    equal one process's up to summation order (tolerances per optimizer in
    tests/scalelab/test_fsdp.py). Operational."""
    fsdp_param_dtype: Literal["auto", "bf16", "fp32"] = "auto"
    """With parallelism 'fsdp': MixedPrecisionPolicy.param_dtype, the dtype parameters are
    all-gathered and computed in (master weights and optimizer state keep the stored dtype;
    gradients are always reduced in fp32). 'auto': bf16 under precision 'bf16-autocast', else
    the stored dtype. bf16 also rounds the embedding output, so the residual stream is bf16;
    'fp32' with 'bf16-autocast' keeps DDP's autocast numerics (fp32 residual stream) at twice
    the all-gather bytes. Operational."""
    activation_checkpointing: Literal["none", "block", "selective"] = "none"
    """Recompute activations in backward instead of saving them, per transformer block
    (``torch.utils.checkpoint``, use_reentrant=False; ``scalelab.model.checkpointing``).
    'none': autograd saves every activation it needs. 'block': only each block's input is
    kept; the whole block runs again in backward (about one extra forward). 'selective': each
    block keeps its input, the outputs of its seven linear projections (wq, wk, wv, wo, w_gate,
    w_up, w_down: the aten.mm results) and every output of the attention kernel (the
    scaled_dot_product_attention op: output and log-sum-exp); everything else (RMSNorm, RoPE,
    SiLU and the gate product, dtype casts, GQA repeats) is recomputed: cheap elementwise
    work, no matmul runs twice. Losses and gradients equal 'none' bitwise on CPU. Operational."""
    # --- operational (never in the run id) ---
    eval_every: int = strict.bounded(100, ge=0, note="0 = at the last step only")
    """Steps between held-out evals (always also at the last step). Operational."""
    eval_batches: int = strict.bounded(8, ge=1, note="and at most the validation windows: "
                                       "val_windows_limit")
    """Held-out batches (of batch_size sequences) per eval: at most the windows the largest
    validation split ``data.val_tokens`` allows, 2·val_tokens // (seq_len + 1)
    (``val_windows_limit``: the batches wrap round the split, so further ones repeat earlier
    ones exactly). Operational."""
    elbo_draws: int = strict.bounded(4, ge=2, le=ELBO_DRAWS_LIMIT)
    """Objective 'mdm': masking draws per validation sequence in each eval. The validation
    ELBO is their mean and its Monte Carlo SE their spread (``scalelab.model.masking``), the
    same seeded draws at every eval. Operational (it changes the estimate's noise, not its
    expectation)."""
    log_every: int = strict.bounded(1, ge=1)
    """Steps between metrics rows, progress lines (tokens/s, ETA) and W&B train metrics.
    Operational."""
    norms_every: int = strict.bounded(50, ge=0, note="0 = off")
    """Steps between per-layer norm records (0 = off). Operational."""
    checkpoint_every: int = strict.bounded(100, ge=1)
    """Steps between checkpoints (also on SIGTERM/SIGUSR1 and at the end). Operational."""
    device: str = "auto"
    """'auto' (cuda if present), 'cpu', 'cuda', 'cuda:N' (``device_problem``). Operational."""

    def __post_init__(self) -> None:
        if problem := device_problem(self.device):
            raise UserError(problem, key="device")



@dataclass(frozen=True, kw_only=True)
class DistillConfig:
    """Distillation from teacher runs (Kim et al. 2025, arXiv 2509.14786; ``scalelab.distill``).

    Sequence-level: the student trains on a mixture of real tokens and tokens sampled from
    the teachers (one run, or an ensemble pooled as a mixture of its members). Logit-level
    (optional): on real tokens the loss adds ``kd_weight`` · KL(teacher ensemble || student).
    All defaults = no distillation; a section at its defaults stays out of the run id.
    """

    teacher: dict[str, Any] = field(default_factory=dict)
    """Selector, dotted key -> value: the runs of the same sweep plan matching all of them
    (every member) are the teachers, e.g. ``{extra.recipe: ensemble, model.preset: 300M}``.
    The planner resolves it into ``teachers``."""
    teachers: tuple[str, ...] = ()
    """Teacher run directories: names under the sweep's ``runs/`` or absolute paths
    (written by the planner from ``teacher``; may also be given directly)."""
    synthetic_weight: float = strict.bounded(0.0, ge=0, lt=1)
    """w: the fraction of each batch's sequences drawn from teacher text, rounded to whole
    sequences (0.9 ensemble teacher, 0.75 self-distillation in Kim et al.). The real data
    still runs data.epochs passes, so steps = U·E / (batch · (1 - w))."""
    synthetic_tokens: int = strict.bounded(0, ge=0)
    """Teacher tokens to generate (whole sequences of data.seq_len + 1); required when w > 0."""
    prompt_len: int = strict.bounded(1, ge=1, note="and at most data.seq_len")
    """Real-data prefix tokens that start each generated sequence: at most data.seq_len, so
    each sequence of seq_len + 1 tokens samples at least one."""
    temperature: float = strict.bounded(1.0, gt=0)
    """Sampling temperature of the teachers (1 in Kim et al.)."""
    seed: int = strict.bounded(0, ge=0, lt=SEED_LIMIT)
    """Generation seed: which member samples each sequence, prompts, and the samples."""
    kd_weight: float = strict.bounded(0.0, ge=0, le=1)
    """alpha of logit-level KD on real data: loss = (1 - alpha)·CE + alpha·tau²·KL (0 = off)."""
    kd_temperature: float = strict.bounded(1.0, gt=0)
    """tau of logit-level KD."""

    def __post_init__(self) -> None:
        if self.synthetic_weight > 0 and self.synthetic_tokens <= 0:
            raise ValueError("synthetic_tokens must be > 0 when synthetic_weight > 0")

    @property
    def active(self) -> bool:
        return self.synthetic_weight > 0 or self.kd_weight > 0


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One training run."""

    name: str = "run"
    """Readable prefix of the run directory. Operational."""
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    """Distillation from teacher runs (off by default)."""
    member: int = strict.bounded(0, ge=0, lt=MEMBER_LIMIT)
    """Ensemble member index. Member k trains with init seed ``train.init_seed + 1000·k`` and
    data-order seed ``data.seed + 1000·k`` (``scalelab.train.seeds``; Kim et al. use seed k)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form tags carried into records (e.g. recipe name); part of the run id."""
    wandb: bool = False
    """Also log to Weights & Biases (offline unless WANDB_MODE says otherwise). Operational."""

    def __post_init__(self) -> None:
        if self.model.objective == "mdm" and self.distill.active:
            raise UserError("distillation trains an autoregressive student on sampled text and "
                            "next-token logits; a masked-diffusion student ('mdm') has neither: "
                            "set model.objective: ar, or turn distill off", key="model.objective")
        if self.distill.prompt_len > self.data.seq_len:
            raise UserError(f"prompt_len={strict.shown(self.distill.prompt_len)} is more than "
                            f"data.seq_len={self.data.seq_len}: a generated sequence holds "
                            "seq_len + 1 tokens, at least one of them sampled", key="distill.prompt_len")
        limit = val_windows_limit(self.data)
        if self.train.eval_batches > limit:
            raise UserError(
                f"eval_batches={strict.shown(self.train.eval_batches)} is more than {limit:,}, the windows of "
                "the validation split (2 * data.val_tokens // (data.seq_len + 1)): the batches "
                "wrap round it, so further ones repeat earlier ones", key="train.eval_batches")


# Dotted keys that never enter the run id (``scalelab.identity``).
OPERATIONAL_KEYS = frozenset(
    {
        "name",
        "wandb",
        "train.eval_every",
        "train.eval_batches",
        "train.elbo_draws",
        "train.log_every",
        "train.norms_every",
        "train.checkpoint_every",
        "train.device",
        "train.compile",
        "train.parallelism",
        "train.fsdp_param_dtype",
        "train.activation_checkpointing",
    }
)


def load_run_config(path: str | Path | None, overrides: list[str] = ()) -> RunConfig:
    """Read a run YAML (or defaults when ``path`` is None) and apply dotted overrides.

    An empty (or comments-only) file is an error: it trained the defaults silently. An
    error caused by an override names the override, not the file."""
    file = str(path) if path is not None else "<overrides>"
    tree = {} if path is None else strict.load_yaml(path)
    if tree is None:
        raise UserError("file is empty (write '{}' to train the defaults)", file=file)
    if isinstance(tree, dict) and "config" in tree and "derived" in tree:
        tree = tree["config"]  # a run directory's resolved config.yaml
    if not isinstance(tree, dict):
        raise UserError("expected a mapping of config sections (model, data, optim, train, ...)",
                        file=file)
    tree = dict(tree)
    sources: dict[str, str] = {}
    for item in overrides:
        key, value = strict.parse_override(item)
        source = strict.override_source(item)
        strict.check_key(RunConfig, key, file=source)
        strict.set_dotted(tree, key, value, file=source)
        sources.pop(key, None)  # the last override of a key is the one that counts
        sources[key] = source
    try:
        return strict.build(RunConfig, tree, file=file)
    except UserError as err:
        source = _override_of(err.key, sources)
        if source is None:
            raise
        raise UserError(err.detail, file=source, key=err.key) from None


def _override_of(key: str | None, sources: dict[str, str]) -> str | None:
    """The last override that set ``key``, a part of it, or a key inside it (a section's
    validation error names the section)."""
    if not key:
        return None
    for set_key in reversed(sources):
        if key == set_key or key.startswith((f"{set_key}.", f"{set_key}[")) or \
                set_key.startswith(f"{key}."):
            return sources[set_key]
    return None
