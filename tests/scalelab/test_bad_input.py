"""Bad input through the real CLI: one line on stderr, exit 2, no traceback.

Each case runs ``python -m scalelab ...`` in a subprocess, as a user would: an alias bomb
(every YAML reader), non-finite floats, non-UTF-8 bytes, duplicate keys, an empty file,
malformed or unknown overrides, and a relaunch on a run directory that already ended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _waits import CEILING_S

from scalelab import strict, yamlsafe
from scalelab.errors import UserError
from scalelab.sweep.view.collect import _base_recipe

REPO = Path(__file__).resolve().parents[2]


def _bomb(levels: int = 8, width: int = 9, indent: str = "") -> str:
    """The "billion laughs" shape: ``width`` aliases of the level below, ``levels`` deep
    (9**8 = 43M leaves from about 400 bytes)."""
    lines = [f"{indent}l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def _flow_bomb(levels: int = 8, width: int = 9) -> str:
    """The same shape as one flow mapping (an override value)."""
    parts = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        parts.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "{" + ", ".join(parts) + "}"


def cli(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, None]:
    """The real CLI in a subprocess (a hang, e.g. an alias bomb expanded, hits CEILING_S)."""
    env = {**os.environ, "SCALELAB_ROOT": str(tmp_path / "root"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "scalelab", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=CEILING_S, check=False)
    return proc, None


def assert_one_line(proc: subprocess.CompletedProcess, *needles: str, code: int = 2) -> str:
    """Exit ``code``; stderr exactly one non-empty ``error:`` line holding every needle."""
    assert proc.returncode == code, (proc.returncode, proc.stderr, proc.stdout)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip() and proc.stderr.endswith("\n"), proc.stderr
    line = lines[0]
    assert line.startswith("error: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


GOOD = "name: good\nmodel: {preset: cpu-50k}\n"


# --- 1. alias bombs: refused before expansion, by every reader ---------------------------


def test_alias_bomb_train(tmp_path):
    cfg = write(tmp_path / "bomb.yaml", "extra:\n" + _bomb(indent="  "))
    proc, _ = cli(tmp_path, "train", cfg)
    assert_one_line(proc, str(cfg), "refused", "nodes with aliases expanded")


def test_alias_bomb_sweep_dry_run(tmp_path):
    spec = write(tmp_path / "bomb.yaml", "name: bomb\nbase:\n  extra:\n" + _bomb(indent="    "))
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, f"{spec}:", "base.extra.l", "refused")


def test_alias_bomb_override(tmp_path):
    cfg = write(tmp_path / "good.yaml", GOOD)
    proc, _ = cli(tmp_path, "train", cfg, f"extra.x={_flow_bomb()}")
    assert_one_line(proc, "override 'extra.x=", "refused")


def test_alias_bomb_collect_base_recipe(tmp_path):
    write(tmp_path / "spec.yaml", "name: bomb\nbase:\n  extra:\n    recipe: r\n" + _bomb(indent="    "))
    with pytest.raises(UserError, match="refused") as err:
        _base_recipe(tmp_path)
    assert "spec.yaml" in str(err.value) and "\n" not in str(err.value)


def test_alias_bomb_function_level_readers(tmp_path):
    bomb = write(tmp_path / "b.yaml", _bomb())
    with pytest.raises(UserError, match="refused"):
        strict.load_yaml(bomb)
    with pytest.raises(UserError, match="refused"):
        strict.parse_override(f"extra.x={_flow_bomb()}")
    from scalelab.sweep.spec.located import parse_located

    with pytest.raises(UserError, match="refused"):
        parse_located(_bomb(), file="b.yaml")


def test_alias_limits_and_legit_aliases():
    few = "base: &b {lr: 1, wd: 0}\none: *b\ntwo: {<<: *b, wd: 2}\n"
    assert yamlsafe.load(few, file="f") == {"base": {"lr": 1, "wd": 0}, "one": {"lr": 1, "wd": 0},
                                            "two": {"lr": 1, "wd": 2}}
    at_limit = "a: &a 1\nb: [" + ", ".join(["*a"] * yamlsafe.MAX_ALIASES) + "]\n"
    assert len(yamlsafe.load(at_limit, file="f")["b"]) == yamlsafe.MAX_ALIASES
    with pytest.raises(UserError, match=f"more than {yamlsafe.MAX_ALIASES} aliases"):
        yamlsafe.load(at_limit.replace("[", "[*a, "), file="f")
    with pytest.raises(UserError, match="recursive alias"):
        yamlsafe.load("a: &a [1, *a]\n", file="f")
    depth = yamlsafe.MAX_DEPTH
    nested = yamlsafe.load("[" * depth + "]" * depth, file="f")
    for _ in range(depth - 1):
        nested = nested[0]
    assert nested == []
    with pytest.raises(UserError, match=f"more than {depth} levels of nesting"):
        yamlsafe.load("[" * (depth + 1) + "]" * (depth + 1), file="f")
    # eight levels of width 3: 3**8 = 6,561 leaves (about 44,000 nodes in all) load fine
    data = yamlsafe.load(_bomb(levels=8, width=3), file="f")
    assert data["l8"][0][0][0][0][0][0][0][0] == ["lol", "lol", "lol"]


@pytest.mark.parametrize("verb", ["train", "sweep"])
def test_deep_nesting_is_refused_not_a_crash(tmp_path, verb):
    """libyaml's composer recursed in C and the process died of SIGSEGV (exit 139)."""
    cfg = write(tmp_path / "deep.yaml", "name: " + "[" * 50_000 + "]" * 50_000 + "\n")
    proc, _ = cli(tmp_path, verb, cfg, *(["--dry-run"] if verb == "sweep" else []))
    assert_one_line(proc, f"{cfg}:1: refused: more than {yamlsafe.MAX_DEPTH} levels of nesting")


# --- 2. non-finite floats ------------------------------------------------------------------


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_float_in_train_config(tmp_path, value):
    cfg = write(tmp_path / "nan.yaml", f"optim: {{lr: {value}}}\n")
    proc, _ = cli(tmp_path, "train", cfg)
    assert_one_line(proc, f"{cfg}: optim.lr: expected a finite number")


def test_non_finite_float_in_override_and_tags(tmp_path):
    cfg = write(tmp_path / "good.yaml", GOOD)
    proc, _ = cli(tmp_path, "train", cfg, "train.warmup=nan")
    assert_one_line(proc, "override 'train.warmup=nan': train.warmup: expected a finite number")
    cfg = write(tmp_path / "tag.yaml", "extra: {x: [1, .inf]}\n")
    proc, _ = cli(tmp_path, "train", cfg)
    assert_one_line(proc, f"{cfg}: extra.x[1]: expected a finite number")


@pytest.mark.parametrize("body,needle", [
    ("base: {optim: {lr: .nan}}\n", ":2: base.optim.lr: expected a finite number"),
    ("grid: {optim.lr: [0.1, .inf]}\n", ":2: grid.optim.lr[1]: expected a finite number"),
])
def test_non_finite_float_in_sweep_spec(tmp_path, body, needle):
    spec = write(tmp_path / "s.yaml", "name: t\n" + body)
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, f"{spec}{needle}")


# --- 3. non-UTF-8 bytes --------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["train", "sweep"])
def test_non_utf8_file(tmp_path, verb):
    cfg = write(tmp_path / "latin1.yaml", b"name: caf\xe9\n")
    args = ["--dry-run"] if verb == "sweep" else []
    proc, _ = cli(tmp_path, verb, cfg, *args)
    assert_one_line(proc, f"{cfg}: not UTF-8", "0xe9", "offset 9")


# --- 4. duplicate keys, empty files --------------------------------------------------------


def test_duplicate_key_in_train_config(tmp_path):
    cfg = write(tmp_path / "dup.yaml", "name: a\noptim: {lr: 0.1}\nname: b\n")
    proc, _ = cli(tmp_path, "train", cfg)
    assert_one_line(proc, f"{cfg}:3: name: duplicate key")


def test_nested_duplicate_key(tmp_path):
    cfg = write(tmp_path / "dup.yaml", "optim:\n  lr: 0.1\n  wd: 0\n  lr: 0.2\n")
    proc, _ = cli(tmp_path, "train", cfg)
    assert_one_line(proc, f"{cfg}:4: optim.lr: duplicate key")


@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_empty_train_config(tmp_path, text):
    cfg = write(tmp_path / "empty.yaml", text)
    proc, _ = cli(tmp_path, "train", cfg)
    assert_one_line(proc, f"{cfg}: file is empty")
    assert not (tmp_path / "root").exists()  # nothing trained


def test_explicit_empty_mapping_is_the_defaults(tmp_path):
    """What the "file is empty" message suggests; no file at all (in-process) also works."""
    from scalelab.config import RunConfig, load_run_config

    assert load_run_config(write(tmp_path / "defaults.yaml", "{}\n")) == RunConfig()
    assert load_run_config(None) == RunConfig()


# --- 5. overrides --------------------------------------------------------------------------


@pytest.mark.parametrize("item,needle", [
    ("=3", "override '=3': empty key (expected dotted.key=value)"),
    (" =3", "override ' =3': empty key"),
    ("a..b=1", "override 'a..b=1': empty segment in key 'a..b'"),
    (".a=1", "empty segment in key '.a'"),
    ("a.=1", "empty segment in key 'a.'"),
    ("optim. lr=1", "override 'optim. lr=1': whitespace in key"),
    ("optim.lr", "override 'optim.lr': missing '='"),
    ("optim.lrr=1", "override 'optim.lrr=1': optim.lrr: unknown key (did you mean 'optim.lr'?)"),
    ("lr=1", "override 'lr=1': lr: unknown key (did you mean 'optim.lr'?)"),
    ("train.batch_size=four", "override 'train.batch_size=four': train.batch_size: expected int"),
    ("name.x=1", "override 'name.x=1': name: cannot set name.x"),
])
def test_bad_override(tmp_path, item, needle):
    cfg = write(tmp_path / "good.yaml", GOOD)
    proc, _ = cli(tmp_path, "train", cfg, item)
    line = assert_one_line(proc, needle)
    assert f"{cfg}:" not in line  # the override is to blame, not the file


# --- 6. a run directory that already ended -------------------------------------------------


def _ended_run_dir(path: Path, state: str, **fields) -> Path:
    path.mkdir(parents=True)
    (path / "status.json").write_text(json.dumps({"state": state, "attempts": 1, **fields}))
    return path


def test_relaunch_of_a_diverged_run_dir(tmp_path):
    cfg = write(tmp_path / "good.yaml", GOOD)
    run_dir = _ended_run_dir(tmp_path / "run", "DIVERGED", steps_done=12,
                             error="train loss nan non-finite at step 12")
    proc, _ = cli(tmp_path, "train", cfg, "--run-dir", run_dir)
    assert_one_line(proc, f"{run_dir / 'status.json'}: run already ended DIVERGED at step 12",
                    "train loss nan non-finite at step 12", "remove the run directory")
    assert json.loads((run_dir / "status.json").read_text())["attempts"] == 1  # untouched


def test_relaunch_of_a_completed_run_dir(tmp_path):
    cfg = write(tmp_path / "good.yaml", GOOD)
    run_dir = _ended_run_dir(tmp_path / "run", "COMPLETED", steps_done=300)
    proc, _ = cli(tmp_path, "train", cfg, "--run-dir", run_dir)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == [f"{run_dir}: run already COMPLETED at step 300; nothing to train"]


def test_relaunch_of_a_diverged_run_dir_of_another_config(tmp_path):
    """The run dir's own config check still comes first (train() refuses it)."""
    cfg = write(tmp_path / "good.yaml", GOOD)
    run_dir = _ended_run_dir(tmp_path / "run", "DIVERGED", steps_done=3)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"run_id": "deadbeef"}))
    proc, _ = cli(tmp_path, "train", cfg, "--run-dir", run_dir)
    assert_one_line(proc, "holds run deadbeef")
