"""derive(): N, U, E, D, steps, FLOPs, warmup for paper-scale and CPU configs; errors."""

import subprocess
import sys

import pytest

from scalelab.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from scalelab.derive import derive
from scalelab.errors import UserError
from scalelab.model import PRESETS, flops_per_token, param_counts

KIM_U = 209_715_200  # "200M" seed tokens: 800 steps × 64 × 4096 (Kim et al. 2025, arXiv 2509.14786)


def kim(preset="150M", unique=KIM_U, epochs=16.0, **train):
    return RunConfig(
        model=ModelConfig(preset=preset),
        data=DataConfig(seq_len=4096, unique_tokens=unique, epochs=epochs, vocab_size=128256),
        train=TrainConfig(batch_size=64, **train),
    )


def test_kim_150m_200m_tokens_16_epochs():
    d = derive(kim())
    assert d.steps == 12_800 and d.tokens_per_step == 262_144
    assert d.unique_tokens == KIM_U and d.epochs == 16.0 and d.total_tokens == 16 * KIM_U
    assert d.n_params == 154_147_328 and d.n_params_non_embedding == 22_813_184
    assert d.vocab_size == 128256
    assert d.flops_per_token == flops_per_token(PRESETS["150M"], 128256, 4096)
    assert d.flops == d.flops_per_token * d.total_tokens
    assert d.warmup_steps == 640  # default warmup 0.05 of steps


@pytest.mark.parametrize("budget", [1, 2, 4, 8])  # 209.7M, 419.4M, 838.9M, 1.68B seed tokens
@pytest.mark.parametrize("epochs", [1, 2, 4, 8, 16, 32, 64])
def test_kim_grid_is_800_steps_per_epoch_per_200m(budget, epochs):
    d = derive(kim("600M", unique=budget * KIM_U, epochs=float(epochs)))
    assert d.steps == 800 * budget * epochs


def test_whole_split_when_unique_tokens_is_none():
    cfg = RunConfig(data=DataConfig(seq_len=128, epochs=2.0), train=TrainConfig(batch_size=16))
    d = derive(cfg, vocab_size=256, train_tokens_available=1_000_000)
    n_seq = 1_000_000 // 129
    assert d.unique_tokens == n_seq * 128
    assert d.steps == (2 * n_seq) // 16 and d.total_tokens == d.steps * 16 * 128
    assert d.epochs == d.total_tokens / d.unique_tokens <= 2.0


def test_fractional_epochs_are_exact_decimals_and_round_down_to_steps():
    cfg = RunConfig(
        data=DataConfig(seq_len=10, unique_tokens=1000, epochs=0.29, vocab_size=256),
        train=TrainConfig(batch_size=1),
    )
    assert derive(cfg).steps == 29  # float 100 * 0.29 = 28.999999999999996 would give 28
    cfg = RunConfig(
        data=DataConfig(seq_len=10, unique_tokens=1000, epochs=2.5, vocab_size=256),
        train=TrainConfig(batch_size=8),
    )
    d = derive(cfg)
    assert d.steps == 250 // 8 == 31 and d.total_tokens == 31 * 80 and d.epochs == 2.48


def test_unique_tokens_round_down_to_whole_sequences():
    cfg = RunConfig(
        data=DataConfig(seq_len=100, unique_tokens=1_050, vocab_size=256),
        train=TrainConfig(batch_size=2),
    )
    d = derive(cfg)
    assert d.unique_tokens == 1_000 and d.steps == 5


def test_warmup_fraction_or_count():
    assert derive(kim(warmup=0.1)).warmup_steps == 1280
    assert derive(kim(warmup=500)).warmup_steps == 500
    assert derive(kim(warmup=0.0)).warmup_steps == 0


def test_vocab_from_config_or_argument():
    cfg = RunConfig(
        data=DataConfig(seq_len=16, unique_tokens=16 * 64), train=TrainConfig(batch_size=8)
    )
    d = derive(cfg, vocab_size=256)
    assert d.vocab_size == 256 and d.n_params == param_counts(PRESETS["cpu-1m"], 256).total


@pytest.mark.parametrize(
    "cfg,kwargs,key",
    [
        (RunConfig(data=DataConfig(unique_tokens=None, vocab_size=256)), {}, "data.unique_tokens"),
        (RunConfig(data=DataConfig(unique_tokens=10**6)), {}, "data.vocab_size"),
        (
            RunConfig(data=DataConfig(unique_tokens=10**9, vocab_size=256)),
            {"train_tokens_available": 10**6},
            "data.unique_tokens",
        ),
        (
            RunConfig(data=DataConfig(unique_tokens=100, seq_len=128, vocab_size=256)),
            {},
            "data.unique_tokens",
        ),
        (RunConfig(data=DataConfig(unique_tokens=128 * 4, vocab_size=256)), {}, "data.epochs"),
        (
            RunConfig(
                data=DataConfig(unique_tokens=10**6, vocab_size=256),
                train=TrainConfig(batch_size=16, micro_batch_size=5),
            ),
            {},
            "train.micro_batch_size",
        ),
        (
            RunConfig(
                data=DataConfig(unique_tokens=10**6, vocab_size=256),
                train=TrainConfig(warmup=10**6),
            ),
            {},
            "train.warmup",
        ),
        (
            RunConfig(
                data=DataConfig(unique_tokens=10**6, vocab_size=256), train=TrainConfig(warmup=2.5)
            ),
            {},
            "train.warmup",
        ),
        (
            RunConfig(data=DataConfig(unique_tokens=10**6, vocab_size=256, epochs=0.0)),
            {},
            "data.epochs",
        ),
        (
            RunConfig(
                data=DataConfig(unique_tokens=10**6, vocab_size=256),
                train=TrainConfig(batch_size=0),
            ),
            {},
            "train.batch_size",
        ),
        (
            RunConfig(
                model=ModelConfig(preset="cpu-3m"),
                data=DataConfig(unique_tokens=10**6, vocab_size=256),
            ),
            {},
            "model.preset",
        ),
    ],
)
def test_impossible_configs_name_the_key(cfg, kwargs, key):
    with pytest.raises(UserError) as err:
        derive(cfg, **kwargs)
    assert err.value.key == key, str(err.value)


def test_derive_is_pure_python_without_torch():
    code = (
        "import sys; from scalelab.derive import derive; from scalelab.config import RunConfig;"
        "derive(RunConfig(), vocab_size=256, train_tokens_available=10**6);"
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
