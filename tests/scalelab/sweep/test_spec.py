"""Sweep spec loading: strict, with file:line, key path and did-you-mean in every error."""

import textwrap
from pathlib import Path

import pytest

from scalelab.errors import UserError
from scalelab.sweep.spec.load import load_spec, parse_spec

SWEEPS = Path(__file__).resolve().parents[3] / "sweeps"

GOOD = textwrap.dedent(
    """\
    name: t
    base:
      model: {preset: cpu-50k}
      data: {unique_tokens: 4096, seq_len: 32, vocab_size: 256}
    grid:
      optim.lr: [1e-3, 3.0e-3]
      data.epochs: [1, 2]
    zip:
      - model.preset: [cpu-50k, cpu-100k]
        train.batch_size: [8, 16]
    derive:
      optim.weight_decay: "0.1 * optim.lr / 1e-3"
    seeds: [0, 1]
    members: 2
    launcher: {executor: debug, time_min: 5}
    """
)


def err(text: str) -> str:
    with pytest.raises(UserError) as info:
        parse_spec(textwrap.dedent(text), file="s.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_good_spec_fields():
    spec = parse_spec(GOOD, file="s.yaml")
    assert spec.name == "t"
    assert spec.grid == {"optim.lr": (1e-3, 3e-3), "data.epochs": (1.0, 2.0)}
    assert isinstance(spec.grid["optim.lr"][0], float)  # "1e-3" (a YAML string) coerced
    assert spec.zip == ({"model.preset": ("cpu-50k", "cpu-100k"), "train.batch_size": (8, 16)},)
    assert [r.target for r in spec.rules] == ["optim.weight_decay"]
    assert spec.seeds == (0, 1) and spec.members == 2
    assert spec.launcher.executor == "debug" and spec.launcher.time_min == 5
    assert spec.base.data.unique_tokens == 4096 and spec.base.model.preset == "cpu-50k"
    assert spec.text == GOOD


@pytest.mark.parametrize("name", ["tiny.yaml", "200M_tokens.yaml", "200M_tokens_scion.yaml",
                                  "tiny_tune.yaml"])
def test_shipped_sweeps_load(name):
    spec = load_spec(SWEEPS / name)
    assert spec.name == name.removesuffix(".yaml")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("name: t\ngird: {}\n", "s.yaml:2: gird: unknown key (did you mean 'grid'?)"),
        ("name: t\nbase:\n  model:\n    d_modle: 3\n",
         "s.yaml:4: base.model.d_modle: unknown key (did you mean 'd_model'?)"),
        ("name: t\nbase:\n  optim: {lr: fast}\n", "s.yaml:3: base.optim.lr: expected float"),
        ("name: t\ngrid:\n  optim.lr: 3e-3\n",
         "s.yaml:3: grid.optim.lr: expected a non-empty list of values, got a string"),
        ("name: t\ngrid:\n  optim.lr: []\n", "s.yaml:3: grid.optim.lr: expected a non-empty list"),
        ("name: t\ngrid:\n  optim.lrr: [1]\n",
         "s.yaml:3: grid.optim.lrr: unknown config key 'optim.lrr' (did you mean 'optim.lr'?)"),
        ("name: t\ngrid:\n  optim: [1]\n", "'optim' is a section"),
        ("name: t\ngrid:\n  optim.lr:\n    - 0.1\n    - x\n",
         "s.yaml:5: grid.optim.lr[1]: expected float, got a string 'x'"),
        ("name: t\ngrid:\n  optim.lr: [0.1, 0.1]\n", "grid.optim.lr[1]: value 0.1 appears twice"),
        ("name: t\nzip:\n  - {optim.lr: [1, 2], optim.eps: [1]}\n",
         "s.yaml:3: zip[0]: zipped lists must have equal lengths (got optim.lr: 2, optim.eps: 1)"),
        ("name: t\ngrid: {optim.lr: [1]}\nzip:\n  - {optim.lr: [1]}\n",
         "zip[0].optim.lr: 'optim.lr' is already varied"),
        ("name: t\nzip: {optim.lr: [1]}\n", "s.yaml:2: zip: expected a list of groups"),
        ("name: t\nderive:\n  optim.lr: \"3 * (\"\n",
         "s.yaml:3: derive.optim.lr: rule '3 * (': syntax error"),
        ("name: t\nderive:\n  optim.lr: 3 * model.d_modl\n",
         "unknown name 'model.d_modl' (did you mean 'model.d_model'?)"),
        ("name: t\nderive:\n  optim.lr: 0.1\n", "a derived value is a rule string"),
        ("name: t\nderive:\n  optim.name: '1'\n", "only numeric keys can be derived"),
        ("name: t\nderive:\n  model.d_model: 2 * N\n", "cannot use N"),
        ("name: t\nderive:\n  optim.lr: optim.weight_decay\n  optim.weight_decay: optim.lr\n",
         "rules form a cycle"),
        ("name: t\ngrid: {optim.lr: [1]}\nderive:\n  optim.lr: '1'\n", "cannot also be derived"),
        ("name: t\nname: u\n", "s.yaml:2: name: duplicate key"),
        ("name: t\ngrid: [1\n", "s.yaml:3: invalid YAML"),
        ("name: t\nbase:\n\tmodel: {}\n", "s.yaml:3: invalid YAML"),
        ("- 1\n- 2\n", "s.yaml: a sweep spec is a mapping"),
        ("grid: {}\n", "s.yaml: name: required"),
        ("name: 'a b'\n", "name: required: a sweep name"),
        ("name: t\nmembers: 0\n", "s.yaml:2: members: expected an integer in [1, 10000]"),
        ("name: t\nseeds: [0, 0]\n", "seeds[1]: seed 0 appears twice"),
        ("name: t\nseeds: [a]\n", "seeds[0]: expected an integer in [0, 2^32)"),
        ("name: t\nseeds: [1]\ngrid: {train.init_seed: [1, 2]}\n", "is set by seeds/members"),
        ("name: t\ngrid: {name: [a, b]}\n", "'name' cannot vary here"),
        ("name: t\nlauncher: {time_min: -5}\n", "s.yaml:2: launcher.time_min: expected a positive"),
        ("name: t\nlauncher: {executer: local}\n", "unknown key (did you mean 'executor'?)"),
        ("name: t\nlauncher: {executor: slurmm}\n", "did you mean 'slurm'?"),
        ("name: t\nlauncher: {flops_per_gpu_s: 1, throughput_tokens_per_gpu_s: 1}\n", "not both"),
        ("name: t\ntune: {method: optuna}\n", "tune.space: method 'optuna' needs"),
        ("name: t\ntune: {space: {optim.lr: {low: 1, high: 0.1}}}\n", "expected low < high"),
        ("name: t\ntune: {space: {optim.lr: {low: 0, high: 1, log: true}}}\n", "low > 0"),
        ("name: t\ntune: {space: {optim.name: {low: 0, high: 1}}}\n", "needs a numeric key"),
        ("name: t\ntune: {space: {optim.lx: {low: 0, high: 1}}}\n", "did you mean 'optim.lr'?"),
        ("name: t\ntune: {method: coordinate}\n", "tune.axes[0]: coordinate axis 'data.epochs' must be a grid key"),
        ("name: t\ngrid: {data.epochs: [1, 2], optim.lr: [1], optim.weight_decay: [0]}\n"
         + "tune: {method: coordinate, start: {data.epochs: 3}}\n",
         "tune.start.data.epochs: start value 3 is not on the grid"),
    ],
)
def test_errors_name_file_line_key(text, expected):
    assert expected in err(text)


def test_load_spec_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_spec(tmp_path / "nope.yaml")


def test_errors_point_at_the_right_line_in_a_real_file(tmp_path):
    text = (SWEEPS / "tiny.yaml").read_text().replace("model.preset:", "model.presett:")
    bad = tmp_path / "tiny.yaml"
    bad.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "model.presett:" in ln)
    with pytest.raises(UserError) as info:
        load_spec(bad)
    assert str(info.value).startswith(f"{bad}:{line}: grid.model.presett: unknown config key")
    assert "did you mean 'model.preset'?" in str(info.value)
