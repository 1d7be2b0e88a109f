"""Property: a mutated train config or a random override builds, or fails as one-line UserError.

Mirrors ``sweep/test_spec_fuzz.py`` for the train-config reader: mutations of a valid run
config (every RunConfig field at its default, plus the keys of sweeps/examples/train_cpu.yaml)
-- renamed and deleted keys, wrong types, nan/inf, garbage strings, broken YAML, duplicate
keys, alias bombs, deep nesting, non-UTF-8 bytes -- go through ``load_run_config`` in-process, 500 each;
so do random override strings. Either a RunConfig comes back (and its run id can be
computed: what ``scalelab train`` does next) or ``scalelab.errors.UserError`` with a
one-line message; any other exception is a bug.
"""

from __future__ import annotations

import copy
import functools
import string
import tempfile
from pathlib import Path

import yaml
from _yamltree import dump, parent_of, paths
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalelab import strict
from scalelab.config import RunConfig, load_run_config
from scalelab.errors import UserError
from scalelab.identity import run_id

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((REPO / "sweeps" / "examples" / "train_cpu.yaml").read_text())
VALID = strict.to_dict(RunConfig())
for _section, _values in EXAMPLE.items():
    if isinstance(_values, dict):
        VALID[_section].update(_values)
    else:
        VALID[_section] = _values
VALID["extra"] = {"recipe": "standard", "tags": [1, 2.5, "x"]}


ALL = list(paths(VALID))
KEYS = [p for p, _ in ALL if isinstance(p[-1], str)]
LEAVES = [p for p, v in ALL if not isinstance(v, (dict, list))]
DOTTED = list(strict.dotted_keys(RunConfig)) + ["extra.recipe", "extra.a.b", "distill.teacher.x"]

NON_FINITE = [float("nan"), float("inf"), float("-inf"), "nan", "inf", "-Infinity", 1e400]
GARBAGE = [{"zz": [1]}, [[1], {"a": 2}], [], {}, None, True, "fast", "1e-3x", "", 2**70, -1,
           0, 0.5, "cpu-1m", ["adamw"], {1: "a"}, "2024-01-01"]
ODD_VALUES = [".nan", ".inf", "-.inf", "nan", "1e400", "[1, 2]", "{a: 1}", "{a: 1, a: 2}",
              "&a [*a]", "[", "]", "{", ": :", "'open", "null", "~", "", "2024-01-01", "!!binary aGk=",
              "!!set {a}", "!!python/object:os.system ''", "*undefined", "\t", "0x10", "1_000",
              ("{l0: &l0 [a, a, a, a, a, a, a, a, a], l1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, "
               "*l0, *l0], l2: [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]}")]
BOMB = "".join(
    [f"  l0: &l0 [{', '.join(['lol'] * 9)}]\n"]
    + [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)]
)


@st.composite
def mutated(draw) -> bytes:
    tree = copy.deepcopy(VALID)
    kind = draw(st.sampled_from(["rename", "delete", "type", "nonfinite", "text", "yaml"]))
    if kind == "rename":
        path = draw(st.sampled_from(KEYS))
        parent = parent_of(tree, path)
        suffix = draw(st.sampled_from(["zz", "_x", "s_", "Q", " ", "\n"]))
        parent[path[-1] + suffix] = parent.pop(path[-1])
    elif kind == "delete":
        path = draw(st.sampled_from(KEYS))
        del parent_of(tree, path)[path[-1]]
    elif kind == "type":
        path = draw(st.sampled_from(LEAVES + KEYS))
        parent_of(tree, path)[path[-1]] = draw(st.sampled_from(GARBAGE))
    elif kind == "nonfinite":
        path = draw(st.sampled_from(LEAVES))
        parent_of(tree, path)[path[-1]] = draw(st.sampled_from(NON_FINITE))
    elif kind == "text":
        path = draw(st.sampled_from(LEAVES))
        parent_of(tree, path)[path[-1]] = draw(st.text(max_size=20))
    text = dump(tree)
    if kind == "yaml":
        lines = text.splitlines()
        how = draw(st.sampled_from(["tab", "unclosed", "cut", "dup", "bomb", "deep", "empty",
                                    "list"]))
        i = draw(st.integers(1, len(lines) - 1))
        if how == "tab":
            lines[i] = "\t" + lines[i]
        elif how == "unclosed":
            lines.append(draw(st.sampled_from(["zzz: [unclosed", "train: {a: [1, 2}", "'open"])))
        elif how == "cut":
            lines[i] = lines[i] + ": : ["
        elif how == "dup":
            lines.append(draw(st.sampled_from([ln for ln in lines if not ln.startswith(" ")])))
        elif how == "bomb":
            lines += ["zz_bomb:", *BOMB.splitlines()]
        elif how == "deep":
            n = draw(st.sampled_from([50, 101, 20_000]))
            lines.append("zz_deep: " + "[" * n + "]" * n)
        elif how == "empty":
            lines = draw(st.sampled_from([[], ["# nothing here"], ["---"], ["null"]]))
        else:
            lines = ["- " + ln for ln in lines]
        text = "\n".join(lines) + "\n"
    data = text.encode()
    if draw(st.integers(0, 19)) == 0:  # sometimes: bytes that are not UTF-8
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xe9", b"\xc3(", b"\x80"])) + data[at:]
    return data


override_text = st.text(alphabet=string.printable + "=.=.éß\u2028", max_size=30)
override_item = st.one_of(
    override_text,
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(DOTTED), st.sampled_from(ODD_VALUES)),
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(DOTTED), override_text),
    st.builds(lambda k, s, v: f"{k}{s}={v}", st.sampled_from(DOTTED),
              st.sampled_from(["x", ".", "..", " ", ".x", "[0]"]), st.sampled_from(ODD_VALUES)),
)

_ROOT = Path(tempfile.mkdtemp(prefix="scalelab-config-fuzz-"))


def _result_or_one_line_user_error(fn):
    """``fn()``, or None when it raised a UserError whose message is one line; any other
    exception propagates (and fails the property)."""
    try:
        return fn()
    except UserError as err:
        message = str(err)
        assert message and len(message.splitlines()) == 1 and "\n" not in message, message
        return None


def _check_config(build) -> None:
    cfg = _result_or_one_line_user_error(build)
    if cfg is not None:
        assert isinstance(cfg, RunConfig)
        assert len(run_id(cfg)) == 32  # the run id, as `scalelab train` computes it next


def test_the_unmutated_config_is_valid():
    path = _ROOT / "valid.yaml"
    path.write_text(dump(VALID))
    cfg = load_run_config(path)
    assert cfg.name == "train-cpu" and cfg.extra["tags"] == [1, 2.5, "x"]


@settings(max_examples=500, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated())
def test_mutated_train_configs_build_or_raise_one_line_user_error(data):
    path = _ROOT / "run.yaml"
    path.write_bytes(data)
    _check_config(lambda: load_run_config(path))


@settings(max_examples=500, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(override_item, min_size=1, max_size=3))
def test_random_overrides_build_or_raise_one_line_user_error(items):
    for item in items:  # the parser, and setting the value in a tree, alone
        parsed = _result_or_one_line_user_error(functools.partial(strict.parse_override, item))
        if parsed is not None:
            tree = {"name": "x"}
            _result_or_one_line_user_error(functools.partial(strict.set_dotted, tree, *parsed))
    _check_config(lambda: load_run_config(None, items))
