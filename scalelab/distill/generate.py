"""Teacher text for sequence-level distillation (Kim et al. 2025, "Pre-training under
infinite compute", arXiv 2509.14786).

The teacher is one run or an ensemble sampled as a *pooled mixture* of its members: each
sequence is drawn from one member, picked uniformly with a seeded RNG (a probability
mixture over members, as in the paper's teacher pool of 8 seeded models). Each sequence
starts from a ``prompt_len``-token prefix cut from the teachers' real training split at a
seeded random offset (the byte tokenizer has no BOS token), then is sampled
autoregressively at ``temperature`` (1 in the paper) up to ``seq_len + 1`` tokens, so one
generated sequence is one training window of the student.

The output is a token directory (``scalelab.data.format``) named by a content hash of the
teachers' weight digests and every generation parameter, under ``cache_dir``: an existing
directory is a cache hit and nothing is generated. For a fixed seed the tokens are the
same on a given device (the generator is seeded per (member, batch); CPU is bitwise
deterministic, CUDA sampling may differ from CPU).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from scalelab.distill.decode import sample_batch
from scalelab.ensemble.load import load_trained, pick_device
from scalelab.identity import canonical_json

__all__ = ["GenerationParams", "assign_members", "draw_prompts", "generate", "generate_tokens", "synthetic_id"]

#: Bump when the sampling procedure changes: old caches then no longer match.
GENERATOR_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class GenerationParams:
    """What, besides the teachers' weights, determines the generated tokens."""

    n_tokens: int
    """Synthetic tokens to generate (rounded up to whole sequences of seq_len + 1)."""
    seq_len: int
    """The student's context; each generated sequence holds seq_len + 1 tokens."""
    prompt_len: int = 1
    """Real-data prefix tokens per sequence (>= 1); they are part of the output."""
    seed: int = 0
    temperature: float = 1.0
    batch_size: int = 64
    """Sequences sampled together (part of the identity: it sets the RNG stream)."""

    @property
    def n_sequences(self) -> int:
        return -(-self.n_tokens // (self.seq_len + 1))


def synthetic_id(teacher_digests: list[str], params: GenerationParams) -> str:
    """16 hex chars of sha256 over the ordered teacher digests and the parameters."""
    blob = canonical_json({"v": GENERATOR_VERSION, "teachers": list(teacher_digests), "params": asdict(params)})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def assign_members(n_sequences: int, n_members: int, seed: int) -> np.ndarray:
    """[n_sequences] member index of each sequence, uniform, seeded (pooled mixture)."""
    rng = np.random.default_rng([seed, 1])
    return rng.integers(0, n_members, size=n_sequences)


def draw_prompts(train_tokens: np.ndarray, n_sequences: int, prompt_len: int, seed: int) -> np.ndarray:
    """[n_sequences, prompt_len] prefixes cut from the real split at seeded offsets."""
    rng = np.random.default_rng([seed, 2])
    starts = rng.integers(0, len(train_tokens) - prompt_len, size=n_sequences)
    return np.stack([np.asarray(train_tokens[s : s + prompt_len], dtype=np.int64) for s in starts])


def generate_tokens(
    models: list[torch.nn.Module],
    prompts: np.ndarray,
    assignment: np.ndarray,
    params: GenerationParams,
    device: torch.device,
) -> np.ndarray:
    """Sample every sequence from its assigned member -> [n_sequences, seq_len + 1] int64."""
    length = params.seq_len + 1
    out = np.empty((len(assignment), length), dtype=np.int64)
    for k, model in enumerate(models):
        rows = np.nonzero(assignment == k)[0]
        for b, start in enumerate(range(0, len(rows), params.batch_size)):
            chunk = rows[start : start + params.batch_size]
            gen = torch.Generator(device=device).manual_seed(params.seed * 1_000_003 + k * 10_007 + b)
            prompt = torch.as_tensor(prompts[chunk], device=device)
            out[chunk] = sample_batch(model, prompt, length, gen, params.temperature).cpu().numpy()
    return out


def generate(
    teacher_dirs: list[str | Path],
    params: GenerationParams,
    cache_dir: str | Path,
    *,
    device: str = "auto",
    log=print,
) -> Path:
    """The token directory of the teachers' samples; generated unless already cached."""
    from scalelab.data import open_dataset
    from scalelab.data.format import write_token_dir

    dev = pick_device(device)
    teachers = [load_trained(d, dev) for d in teacher_dirs]
    sid = synthetic_id([t.digest for t in teachers], params)
    out = Path(cache_dir) / sid
    if (out / "meta.json").is_file():
        log(f"synthetic tokens cached: {out}")
        return out
    dataset = open_dataset(teachers[0].cfg.data)
    n = params.n_sequences
    prompts = draw_prompts(np.asarray(dataset.train), n, params.prompt_len, params.seed)
    assignment = assign_members(n, len(teachers), params.seed)
    log(f"generating {n} sequences x {params.seq_len + 1} tokens from {len(teachers)} teacher(s) on {dev}")
    tokens = generate_tokens([t.model for t in teachers], prompts, assignment, params, dev)
    write_token_dir(
        out,
        tokens.reshape(-1),
        vocab_size=dataset.vocab_size,
        tokenizer_id=dataset.tokenizer_id,
        eos_id=None,
        n_documents=n,
        sources=[str(t.run_dir) for t in teachers],
        extra={
            "synthetic": True,
            "synthetic_id": sid,
            "teacher_digests": [t.digest for t in teachers],
            "generation": asdict(params),
            "sequence_length": params.seq_len + 1,
            "member_counts": np.bincount(assignment, minlength=len(teachers)).tolist(),
        },
    )
    log(f"synthetic tokens written: {out}")
    return out
