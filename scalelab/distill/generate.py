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
teachers' weight digests and every generation parameter (the whole sha256, 64 hex), under
``cache_dir``: a directory whose header records the same digests and parameters is a cache
hit and nothing is generated (``find_cached``; a hash prefix alone never decides it). For a fixed seed the tokens are
the same on a given device (the generator is seeded per (member, batch); CPU is bitwise
deterministic, CUDA sampling may differ from CPU).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from scalelab.config import RunConfig
from scalelab.distill.decode import sample_batch
from scalelab.ensemble.load import load_trained, pick_device
from scalelab.errors import UserError
from scalelab.identity import canonical_json

__all__ = ["GenerationParams", "assign_members", "check_teacher", "draw_prompts", "find_cached", "generate",
           "generate_tokens", "synthetic_id"]

#: Bump when the sampling procedure changes: old caches then no longer match.
GENERATOR_VERSION = 1
LEGACY_HEX = 16
"""Hex digits of the cache directory names written before the name was the whole hash."""


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


def check_teacher(teacher: RunConfig, name: str, where: str = "distill.teachers") -> None:
    """Refuse a masked-diffusion teacher in one line: distillation samples text left to right
    and matches next-token logits, which a bidirectional denoiser does not define."""
    if teacher.model.objective != "ar":
        raise UserError(f"teacher {name} is a masked-diffusion model (model.objective: "
                        f"{teacher.model.objective}); distillation needs autoregressive teachers "
                        "(next-token sampling and logits)", key=where)


def synthetic_id(teacher_digests: list[str], params: GenerationParams) -> str:
    """sha256 (all 64 hex) over the generator version, the ordered teacher digests and the
    parameters: the cache key. Whole, as the run id's full hash (``scalelab.identity``):
    two generations that shared a prefix would otherwise share one cache directory."""
    blob = canonical_json({"v": GENERATOR_VERSION, "teachers": list(teacher_digests), "params": asdict(params)})
    return hashlib.sha256(blob.encode()).hexdigest()


def find_cached(cache_dir: str | Path, sid: str, teacher_digests: list[str],
                params: GenerationParams) -> Path | None:
    """The cached token directory of generation ``sid``, or None: ``<cache_dir>/<sid>``, else
    one named by the first ``LEGACY_HEX`` digits (written before names were whole), each
    taken only when its header records this generator version, these teacher digests (in
    order) and these parameters. A directory of the full name whose header says otherwise
    is refused in one line (it would be overwritten with other tokens)."""
    for name in (sid, sid[:LEGACY_HEX]):
        path = Path(cache_dir) / name
        meta = _read_meta(path)
        if meta is None:
            continue
        if (meta.get("generator_version", 1) == GENERATOR_VERSION
                and meta.get("teacher_digests") == list(teacher_digests)
                and meta.get("generation") == asdict(params)):
            return path
        if name == sid:
            raise UserError("holds teacher text of other teachers or parameters than its name says; "
                            "remove it to regenerate", file=str(path))
    return None


def _read_meta(path: Path) -> dict | None:
    """The header of token directory ``path`` (None: none, or not a JSON object)."""
    import json

    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


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
    for t in teachers:
        check_teacher(t.cfg, t.run_dir.name)
    digests = [t.digest for t in teachers]
    sid = synthetic_id(digests, params)
    cached = find_cached(cache_dir, sid, digests, params)
    if cached is not None:
        log(f"synthetic tokens cached: {cached}")
        return cached
    out = Path(cache_dir) / sid
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
            "generator_version": GENERATOR_VERSION,
            "teacher_digests": digests,
            "generation": asdict(params),
            "sequence_length": params.seq_len + 1,
            "member_counts": np.bincount(assignment, minlength=len(teachers)).tolist(),
        },
    )
    log(f"synthetic tokens written: {out}")
    return out
