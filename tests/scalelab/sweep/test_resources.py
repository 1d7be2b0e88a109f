"""Resources per block and per run (scalelab/sweep/plan/resources.py): block launchers, derive
rules on launcher keys, setup lines and env. They change submissions, never run ids.

The sbatch scripts come from the recording fake ``sbatch`` (conftest.py) and are
compared with golden files (test_sbatch_golden.py: SCALELAB_UPDATE_GOLDEN=1 rewrites them).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_probe import PREFIX as PROBE
from env_probe import TARGET as PROBE_TARGET
from lifecycle_helpers import FAKE, cli, fake_env
from test_sbatch_golden import GOLDEN, check_golden, normalise

from scalelab.errors import UserError
from scalelab.sweep.plan import resources
from scalelab.sweep.plan.expand import expand
from scalelab.sweep.run.backends.debug import DebugBackend
from scalelab.sweep.run.backends.slurm import SlurmBackend
from scalelab.sweep.run.launch import execute, plan_from_disk
from scalelab.sweep.spec import launcher as launcher_keys
from scalelab.sweep.spec.load import parse_spec
from scalelab.sweep.spec.sections import LauncherConfig

BASE = {
    "model": {"preset": "cpu-50k"},
    "data": {"dataset": "/nonexistent/x", "vocab_size": 256, "unique_tokens": 4096, "seq_len": 32},
    "train": {"batch_size": 8},
}
"""Planned only (the fake trainer and the fake sbatch never read data): N = 51,936 for
cpu-50k and 234,048 for cpu-250k; 1.2e9 and 5.7e9 training FLOPs at 1 epoch."""

TREE = {
    "name": "res",
    "base": BASE,
    "grid": {"model.preset": ["cpu-50k", "cpu-250k"], "optim.lr": [1e-3, 3e-3]},
    "launcher": {
        "executor": "slurm", "partition": "gpu", "cpus_per_task": 4, "array_parallelism": 8,
        "flops_per_gpu_s": 1.0e7, "signal_delay_s": 60,
        "setup": ["module load cuda/12.4", "source /opt/venvs/lab/bin/activate"],
        "env": {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": 4, "NCCL_SOCKET_IFNAME": "^lo,docker"},
    },
    "derive": {
        "launcher.gpus_per_node": "1 if N < 1e5 else 4",
        "launcher.tasks_per_node": "launcher.gpus_per_node",
        # 1.5x the compute time at flops_per_gpu_s, + 5 min; rounded up to 15 min or 1 h
        "launcher.time_min": "ladder(1.5 * FLOPs / (launcher.gpus_per_node"
                             " * launcher.flops_per_gpu_s) / 60 + 5, 15, 60)",
    },
    "blocks": [{
        "name": "long",
        "base": {"model": {"preset": "cpu-250k"}, "data": {"epochs": 8},
                 "extra": {"recipe": "long"}},
        "launcher": {"nodes": 2, "mem_gb": 512, "setup": ["module load cuda/12.6"],
                     "env": {"NCCL_IB_HCA": "mlx5"}},
    }],
}
"""The 'tuned' grid (cpu-50k on 1 GPU, cpu-250k on 4, both 15 min) and a block 'long'
(8 epochs: 1 h; two nodes, its own setup line, one more env var)."""


def _text(tree: dict) -> str:
    return yaml.safe_dump(tree, sort_keys=False)


def _spec(tree: dict, file: str = "res.yaml"):
    return parse_spec(_text(tree), file=file)


def _without_resources(tree: dict) -> dict:
    out = json.loads(json.dumps(tree))
    out.pop("launcher")
    out.pop("derive")
    for block in out.get("blocks", []):
        block.pop("launcher", None)
    return out


def _ids(tree: dict) -> list[tuple[str, str]]:
    plan = expand(_spec(tree))
    return list(zip(plan.table["run_id"], plan.table["run_dir"]))


def test_plan_resolves_each_runs_launcher():
    plan = expand(_spec(TREE))
    shown = [resources.describe(x) for x in plan.launchers]
    assert list(plan.table["name"]) == ["tuned_cpu-50k_lr0.001", "tuned_cpu-50k_lr0.003",
                                        "tuned_cpu-250k_lr0.001", "tuned_cpu-250k_lr0.003", "long"]
    assert shown == ["1 GPU · 0h15"] * 2 + ["4 GPU · 0h15"] * 2 + ["2×4 GPU · mem 512G · 1h00"]
    assert [x.tasks_per_node for x in plan.launchers] == [1, 1, 4, 4, 4]
    long = plan.launchers[-1]
    assert long.setup == ("module load cuda/12.6",)  # a list replaces
    assert long.env == {**TREE["launcher"]["env"], "NCCL_IB_HCA": "mlx5"}  # env adds keys
    assert plan.launchers[0] is plan.launchers[1]  # equal results share one object
    assert resources.summary(plan.launchers, plan.spec.launcher) == [
        "1 GPU · 0h15: 2 runs", "4 GPU · 0h15: 2 runs",
        ('2×4 GPU · mem 512G · 1h00 · setup=["module load cuda/12.6"] · env={"NCCL_DEBUG": "WARN", '
         '"OMP_NUM_THREADS": 4, "NCCL_SOCKET_IFNAME": "^lo,docker", "NCCL_IB_HCA": "mlx5"}: 1 run')]
    # the GPU-hours use the run's own launcher
    assert plan.table["gpu_hours"].to_list() == pytest.approx(
        [f / 1e7 / 3600 for f in plan.table["flops"]])


def test_per_block_and_derived_launchers_change_submissions_not_run_ids(fake_slurm, tmp_path):
    plan = expand(_spec(TREE))
    assert list(zip(plan.table["run_id"], plan.table["run_dir"])) == _ids(_without_resources(TREE))
    sweep = tmp_path / "sw"
    report = execute(plan, sweep, plan.spec.launcher, wait=False, target=FAKE,
                     backend=SlurmBackend(plan.spec.launcher, sweep, throttle_s=0))
    # one array per resource group; the lone long run is a plain job
    assert [h.job_id for h in report.handles] == ["100_0", "100_1", "101_0", "101_1", "102"]
    scripts = {}
    for n, case in ((100, "resources_1gpu"), (101, "resources_4gpu"), (102, "resources_block")):
        text = (fake_slurm / f"sbatch_{n}.sh").read_text().replace("scalelab-sw", "scalelab-sweep")
        scripts[case] = normalise(text, sweep.resolve(), sys.executable)
        check_golden(case, scripts[case])
    one, four, block = scripts.values()
    assert "#SBATCH --array=0-1%2" in one and "#SBATCH --gpus-per-node=1" in one
    assert "#SBATCH --ntasks-per-node=1" in one and "#SBATCH --time=15" in one
    assert "#SBATCH --gpus-per-node=4" in four and "#SBATCH --ntasks-per-node=4" in four
    assert "--array" not in block and "#SBATCH --nodes=2" in block and "#SBATCH --time=60" in block
    assert "#SBATCH --mem=512G" in block
    # setup lines first, then the env (quoted, literal), then the code snapshot
    lines = one.splitlines()
    order = [lines.index(x) for x in (
        "module load cuda/12.4", "source /opt/venvs/lab/bin/activate", "export NCCL_DEBUG=WARN",
        "export OMP_NUM_THREADS=4", "export NCCL_SOCKET_IFNAME='^lo,docker'",
        "export PYTHONSAFEPATH=1")]
    assert order == sorted(order)
    assert "module load cuda/12.6" in block and "module load cuda/12.4" not in block
    assert "export NCCL_IB_HCA=mlx5" in block and "export NCCL_IB_HCA" not in one
    # retry re-derives what each run is launched with from the spec, per-run rules and
    # blocks included; nothing of it is stored in (or read back from) a run directory
    dirs = [sweep / d for d in plan.table["run_dir"]]
    assert not any((d / "launcher.yaml").exists() for d in dirs)
    assert plan_from_disk(sweep, plan.spec).launchers == plan.launchers


def test_goldens_hold_the_resources(tmp_path):
    block = (GOLDEN / "resources_block.sh").read_text()
    for flag in ("--nodes=2", "--gpus-per-node=4", "--ntasks-per-node=4", "--cpus-per-task=4",
                 "--mem=512G", "--time=60", "--partition=gpu", "--signal=USR2@60"):
        assert f"#SBATCH {flag}" in block, flag
    assert "#SBATCH --gpus-per-node=1" in (GOLDEN / "resources_1gpu.sh").read_text()


def _sample(tp: Any, default: Any) -> Any:
    """A valid value of annotation ``tp`` other than ``default``."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        tp = next(a for a in get_args(tp) if a is not type(None))
    if get_origin(tp) is Literal:
        return next(a for a in get_args(tp) if a != default)
    if tp is bool:
        return not default
    if tp is int:
        return 2  # world sizes of 2 and 4 divide the batch of 8
    if tp is float:
        return 64.0
    if tp is str:
        return "x"
    if get_origin(tp) is tuple:
        return ["true"]
    if get_origin(tp) is dict:
        return {"SOME_KEY": "1"}
    raise AssertionError(f"no sample for {tp}")


_FIELDS = [(f.name, _sample(t, f.default if f.default is not dataclasses.MISSING else None))
           for f in dataclasses.fields(LauncherConfig)
           for t in [get_type_hints(LauncherConfig)[f.name]]]


@pytest.mark.parametrize("name, value", _FIELDS, ids=[n for n, _ in _FIELDS])
def test_no_launcher_key_enters_a_run_id(name, value):
    """Every launcher key, at the top level, in a block and (numeric ones) derived."""
    tree = {"name": "ids", "base": BASE, "grid": {"optim.lr": [1e-3, 3e-3]},
            "blocks": [{"name": "b", "base": {"extra": {"recipe": "b"}}}]}
    before = _ids(tree)
    top = {**tree, "launcher": {name: value}}
    assert _ids(top) == before
    if name in launcher_keys.SWEEP_WIDE:
        return
    in_block = json.loads(json.dumps(tree))
    in_block["blocks"][0]["launcher"] = {name: value}
    assert _ids(in_block) == before
    key = launcher_keys.PREFIX + name
    if key in launcher_keys.numeric_keys():
        derived = {**tree, "derive": {key: "4 if N < 1e5 else 8"}}
        plan = expand(_spec(derived))
        assert list(zip(plan.table["run_id"], plan.table["run_dir"])) == before
        assert {getattr(x, name) for x in plan.launchers} == {4}  # the rule took effect


def _bad(tmp_path, capsys, tree: dict) -> str:
    spec = tmp_path / "bad.yaml"
    spec.write_text(_text(tree))
    assert cli("sweep", str(spec), "--dry-run", "--root", str(tmp_path / "root")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.replace(str(spec), "bad.yaml").strip()


def test_bad_launcher_key_in_a_block_is_one_line_exit_2(tmp_path, capsys):
    tree = json.loads(json.dumps(TREE))
    tree["blocks"][0]["launcher"]["gpus_per_nod"] = 8
    line = _text(tree).splitlines().index("    gpus_per_nod: 8") + 1
    assert _bad(tmp_path, capsys, tree) == (
        f"error: bad.yaml:{line}: blocks[0].launcher.gpus_per_nod: "
        "unknown key (did you mean 'gpus_per_node'?)")


@pytest.mark.parametrize("change, message", [
    (lambda t: t["derive"].update({"launcher.gpus_per_nod": "1"}),
     ("derive.launcher.gpus_per_nod: unknown launcher key 'launcher.gpus_per_nod' "
      "(did you mean 'launcher.gpus_per_node'?)")),
    (lambda t: t["derive"].update({"launcher.max_parallel": "2"}),
     ("derive.launcher.max_parallel: 'launcher.max_parallel' is sweep-wide: set it in the "
      "top-level launcher")),
    (lambda t: t["derive"].update({"launcher.partition": "2"}),
     "derive.launcher.partition: only numeric keys can be derived"),
    (lambda t: t["derive"].update({"optim.weight_decay": "1e-3 * launcher.gpus_per_node"}),
     ("derive.optim.weight_decay: 'launcher.gpus_per_node' is known once the run's config is "
      "derived: only launcher.* rules read it")),
    (lambda t: t["derive"].update({"optim.weight_decay": "1e-22 * FLOPs"}),
     ("derive.optim.weight_decay: 'FLOPs' is known once the run's config is derived: only "
      "launcher.* rules read it")),
    (lambda t: t["derive"].update({"launcher.nodes": "0 if N < 1e5 else 1"}),
     "derive.launcher.nodes: run 'cpu-50k_lr0.001': expected a positive number, got 0"),
    (lambda t: t["derive"].update({"launcher.mem_gb": "launcher.max_array_size * 2"}),
     ("derive.launcher.mem_gb: run 'cpu-50k_lr0.001': 'launcher.max_array_size' is None, "
      "not a number")),
    (lambda t: t["blocks"][0]["launcher"].update({"executor": "local"}),
     "blocks[0].launcher.executor: sweep-wide: set it in the top-level launcher"),
    (lambda t: t["blocks"][0].update({"derive": {"launcher.nodes": "3"}}),
     "blocks[0].launcher.nodes: also derived by this block's derive.launcher.nodes; keep one"),
    (lambda t: t["blocks"][0]["launcher"].update({"env": {"NO-DASH": 1}}),
     "blocks[0].launcher.env.NO-DASH: not an environment variable name (letters, digits, '_')"),
    (lambda t: t["launcher"].update({"setup": ["module load x", ""]}),
     "launcher.setup[1]: expected one non-empty shell line"),
    (lambda t: t["launcher"]["env"].update({"FLAG": True}),
     "launcher.env.FLAG: expected str | int | float, got bool True"),
])
def test_resource_mistakes_are_one_line_exit_2(tmp_path, capsys, change, message):
    tree = json.loads(json.dumps(TREE))
    change(tree)
    err = _bad(tmp_path, capsys, tree)
    assert err.startswith("error: bad.yaml:") and err.endswith(message), err


def test_a_block_value_wins_over_an_inherited_rule():
    tree = json.loads(json.dumps(TREE))
    tree["blocks"][0]["launcher"]["gpus_per_node"] = 2
    launchers = expand(_spec(tree)).launchers
    assert [x.gpus_per_node for x in launchers] == [1, 1, 4, 4, 2]
    assert launchers[-1].tasks_per_node == 2  # rules reading it see the block's value
    # the top level's own constant is a default that its rule overrides, as base is
    tree["launcher"]["gpus_per_node"] = 8
    assert [x.gpus_per_node for x in expand(_spec(tree)).launchers] == [1, 1, 4, 4, 2]


def test_rule_env_names_for_launcher_rules():
    tree = json.loads(json.dumps(TREE))
    tree["derive"] = {"launcher.time_min": "steps + D / 1e6 + 0 * N + data.epochs",
                      "launcher.cpus_per_task": "2 + launcher.nodes"}
    plan = expand(_spec(tree))
    expected = [s + d / 1e6 + e for s, d, e in
                zip(plan.table["steps"], plan.table["D_total"], [1, 1, 1, 1, 8])]
    assert [x.time_min for x in plan.launchers] == [round(v) for v in expected]
    assert [x.cpus_per_task for x in plan.launchers] == [3, 3, 3, 3, 4]


def test_env_reaches_local_and_debug_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", fake_env()["PYTHONPATH"])
    monkeypatch.setenv(f"{PROBE}KEPT", "from-the-launching-shell")
    tree = {"name": "envs", "base": BASE, "grid": {"optim.lr": [1e-3, 3e-3]},
            "launcher": {"executor": "local", "max_parallel": 2, "setup": ["exit 1"],
                         "env": {f"{PROBE}A": "a b", f"{PROBE}N": 3}},
            "derive": {"launcher.time_min": "10 if optim.lr < 2e-3 else 20"}}
    plan = expand(_spec(tree))
    wanted = {f"{PROBE}A": "a b", f"{PROBE}N": "3", f"{PROBE}KEPT": "from-the-launching-shell"}
    for backend in (None, DebugBackend()):
        sweep = tmp_path / ("local" if backend is None else "debug")
        report = execute(plan, sweep, plan.spec.launcher, wait=True, backend=backend,
                         target=PROBE_TARGET, progress=False)
        assert set(report.results.values()) == {"COMPLETED"}  # setup lines are Slurm's only
        for run_dir in plan.table["run_dir"]:
            assert json.loads((sweep / run_dir / "env.json").read_text()) == wanted
    assert f"{PROBE}A" not in os.environ  # the debug backend restores this process's env


def test_dry_run_shows_resources_per_group(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "res.yaml"
    spec.write_text(_text(TREE))
    monkeypatch.setenv("COLUMNS", "250")
    assert cli("sweep", str(spec), "--dry-run", "--runs", "--root", str(tmp_path / "root")) == 0
    out = capsys.readouterr().out
    groups = ("resources (one Slurm job array per line):\n"
              "  1 GPU · 0h15: 2 runs\n  4 GPU · 0h15: 2 runs\n")
    assert groups in out
    assert out.count("2×4 GPU · mem 512G · 1h00") == 2  # its row and its group


def test_launcher_errors_outside_specs_are_user_errors():
    with pytest.raises(UserError, match="launcher.time_min: expected a positive number"):
        launcher_keys.check_launcher(LauncherConfig(time_min=0))


def test_distillation_stages_keep_each_runs_resources_and_their_dependencies(fake_slurm, tmp_path):
    from scalelab.distill.stages import execute_staged

    tree = {"name": "kd", "base": BASE, "launcher": {"executor": "slurm", "partition": "gpu"},
            "derive": {"launcher.gpus_per_node": "1 if N < 1e5 else 4",
                       "launcher.tasks_per_node": "launcher.gpus_per_node"},
            "blocks": [
                {"name": "teachers", "base": {"extra": {"recipe": "ens"}}, "members": 2},
                {"name": "student", "launcher": {"gpus_per_node": 2},
                 "base": {"extra": {"recipe": "kd"},
                          "distill": {"teacher": {"extra.recipe": "ens"}, "synthetic_weight": 0.5,
                                      "synthetic_tokens": 4096}}}]}
    plan = expand(_spec(tree))
    report = execute_staged(plan, tmp_path / "sw", plan.spec.launcher, wait=False, target=FAKE)
    assert [h.job_id for h in report.handles] == ["100_0", "100_1", "102"]
    teachers, generation, student = (
        (fake_slurm / f"sbatch_{n}.sh").read_text().splitlines() for n in (100, 101, 102))
    assert "#SBATCH --gpus-per-node=1" in teachers and "#SBATCH --array=0-1%2" in teachers
    assert not any(x.startswith("#SBATCH --dependency") for x in teachers)
    # the generation job runs with its student's launcher, after the teachers
    assert "#SBATCH --gpus-per-node=2" in generation and "#SBATCH --ntasks-per-node=2" in generation
    assert "#SBATCH --dependency=afterok:100_0:100_1" in generation
    assert "#SBATCH --gpus-per-node=2" in student and "#SBATCH --dependency=afterok:101" in student
