"""Property: every mutated (invalid) sweep spec exits 2 with one line on stderr, no traceback.

Mutations of one valid spec: renamed keys (a misspelling), deleted required or referenced
keys, wrong types, out-of-range values, bad derive rules and broken YAML. 500 of them run
through ``scalelab.cli.main`` in-process (``sweep SPEC --dry-run``, the real code path up
to the plan); a handful more as real subprocesses.
"""

import contextlib
import copy
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _waits import CEILING_S
from _yamltree import dump, parent_of, paths
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalelab.cli import main

VALID = {
    "name": "fuzz",
    "description": "a valid spec that the mutations break",
    "base": {
        "model": {"preset": "cpu-50k"},
        "data": {"dataset": "/nonexistent/fuzz-data", "vocab_size": 256,
                 "unique_tokens": 4096, "seq_len": 32, "val_tokens": 4096},
        "optim": {"name": "adamw", "betas": [0.9, 0.95]},
        "train": {"batch_size": 8, "schedule": "cosine", "warmup": 0.1},
    },
    "grid": {"data.epochs": [1, 2], "optim.lr": [0.001, 0.003],
             "optim.weight_decay": [0.0, 0.1]},
    "zip": [{"model.preset": ["cpu-50k", "cpu-100k"], "train.batch_size": [8, 16]}],
    "derive": {"optim.eps": "1e-8 * model.d_model / 32"},
    "members": 1,
    "seeds": [0],
    "launcher": {"executor": "debug", "time_min": 10, "max_parallel": 1},
    "tune": {"method": "coordinate", "axes": ["data.epochs", "optim.lr", "optim.weight_decay"],
             "start": {"data.epochs": 1, "optim.lr": 0.001, "optim.weight_decay": 0.0}},
}

REQUIRED = [("name",), ("base", "data", "vocab_size"), ("base", "data", "unique_tokens"),
            ("grid", "data.epochs"), ("grid", "optim.lr"), ("grid", "optim.weight_decay")]

BAD_VALUES = [
    (("members",), 0), (("members",), -3), (("seeds",), []), (("seeds",), [-1]),
    (("seeds",), [0, 0]), (("launcher", "time_min"), 0), (("launcher", "executor"), "slurmm"),
    (("base", "train", "schedule"), "cosin"), (("grid", "data.epochs"), []),
    (("grid", "data.epochs"), [0]), (("grid", "data.epochs"), [1, 1]),
    (("zip",), [{"model.preset": ["cpu-50k", "cpu-100k"], "train.batch_size": [0, 16]}]),
    (("zip",), [{"model.preset": ["cpu-51k", "cpu-100k"], "train.batch_size": [8, 16]}]),
    (("base", "data", "seq_len"), 0), (("base", "optim", "betas"), [0.9]),
    (("tune", "start", "optim.lr"), 0.5),
    (("tune", "method"), "grid"), (("name",), "bad name!"),
    (("zip",), [{"model.preset": ["cpu-50k"], "train.batch_size": [8, 16]}]),
    (("base", "data", "unique_tokens"), 3), (("base", "train", "warmup"), -1),
    (("launcher", "flops_per_gpu_s"), -1.0), (("grid",), [1, 2]), (("derive",), "x"),
]

BAD_RULES = ["1e-8 *", "model.d_modl", "foo(1)", "1 / 0", "sqrt(-1)", "__import__('os')",
             "lambda: 1", "[1]", "'a'", "10 ** 10 ** 10", "optim.eps * 2", "min(1)",
             "1e-8 * (model.d_model - 32) ** -1", "", "N > 1", "log(0)"]


ALL = list(paths(VALID))
KEYS = [p for p, _ in ALL if isinstance(p[-1], str)]
LEAVES = [p for p, v in ALL if not isinstance(v, (dict, list))]
NUMERIC = [p for p, v in ALL if isinstance(v, (int, float)) and not isinstance(v, bool)]


@st.composite
def mutated(draw) -> str:
    tree = copy.deepcopy(VALID)
    kind = draw(st.sampled_from(["rename", "delete", "type", "number", "value", "rule", "yaml"]))
    if kind == "rename":
        path = draw(st.sampled_from(KEYS))
        parent = parent_of(tree, path)
        suffix = draw(st.sampled_from(["zz", "_x", "s_", "Q"]))
        parent[path[-1] + suffix] = parent.pop(path[-1])
    elif kind == "delete":
        path = draw(st.sampled_from(REQUIRED))
        del parent_of(tree, path)[path[-1]]
    elif kind == "type":
        path = draw(st.sampled_from(LEAVES))
        parent_of(tree, path)[path[-1]] = draw(st.sampled_from([{"zz": [1]}, [[1], {"a": 2}]]))
    elif kind == "number":
        path = draw(st.sampled_from(NUMERIC))
        parent_of(tree, path)[path[-1]] = draw(st.sampled_from(["notanumber", "1e-3x", "fast"]))
    elif kind == "value":
        path, value = draw(st.sampled_from(BAD_VALUES))
        parent_of(tree, path)[path[-1]] = value
    elif kind == "rule":
        tree["derive"]["optim.eps"] = draw(st.sampled_from(BAD_RULES))
    text = dump(tree)
    if kind == "yaml":
        lines = text.splitlines()
        how = draw(st.sampled_from(["tab", "unclosed", "cut"]))
        if how == "tab":
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = "\t" + lines[i]
        elif how == "unclosed":
            lines.append(draw(st.sampled_from(["zzz: [unclosed", "grid: {a: [1, 2}", "'open"])))
        else:
            i = draw(st.integers(1, len(lines) - 1))
            lines[i] = lines[i] + ": : ["
        text = "\n".join(lines) + "\n"
    return text


_ROOT = Path(tempfile.mkdtemp(prefix="scalelab-fuzz-"))


def _run_in_process(text: str) -> tuple[int, str]:
    path = _ROOT / "spec.yaml"
    path.write_text(text)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            main(["sweep", str(path), "--dry-run", "--root", str(_ROOT / "root")])
            code = 0
        except SystemExit as exit_:
            code = exit_.code
    return code, err.getvalue()


def test_the_unmutated_spec_is_valid():
    code, err = _run_in_process(dump(VALID))
    assert code == 0, err


@settings(max_examples=500, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated())
def test_mutated_specs_exit_2_with_one_line(text):
    code, err = _run_in_process(text)
    assert code == 2, (code, err, text)
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert "spec.yaml" in err  # the error names the file


@pytest.mark.parametrize("mutation", [
    lambda t: t.replace("optim.lr:", "optim.lrr:", 1),
    lambda t: t + "\tbroken: yaml\n",
    lambda t: t.replace("members: 1", "members: many"),
])
def test_real_subprocess_exit_2_one_line(tmp_path, mutation):
    spec = tmp_path / "bad.yaml"
    spec.write_text(mutation(dump(VALID)))
    env = {**os.environ, "SCALELAB_ROOT": str(tmp_path / "root")}
    proc = subprocess.run([sys.executable, "-m", "scalelab", "sweep", str(spec), "--dry-run"],
                          capture_output=True, text=True, env=env, timeout=CEILING_S, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"error: {spec}:")
    assert "Traceback" not in proc.stderr
