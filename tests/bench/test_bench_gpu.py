"""bench/gpu.py, the one GPU command: its no-CUDA line, its ``--cpu-smoke`` run (every code
path at toy sizes: the report's structure, not its numbers), the launch command and the
peak table. The GPU numbers themselves come only from a run on a GPU."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _waits import CEILING_S

from optim.kernels import HAS_TRITON

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import gpu_report
import gpu_train


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(BENCH / "gpu.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=CEILING_S, check=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="measures on a CUDA machine")
def test_without_cuda_one_line_and_exit_0():
    proc = _run()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "no CUDA device: nothing measured"


@pytest.mark.slow
def test_cpu_smoke_runs_every_section(tmp_path):
    proc = _run("--cpu-smoke", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (json_path,) = tmp_path.glob("gpu-cpu-smoke-*.json")
    assert json_path.with_suffix(".md").is_file()
    report = json.loads(json_path.read_text())
    assert report["mode"] == "cpu-smoke" and report["errors"] == []
    for heading in ("## CUDA tests", "## Newton-Schulz", "## Training", "saved "):
        assert heading in proc.stdout

    tests = report["cuda_tests"]  # every cuda-marked test collected, and skipped on a CPU
    assert tests["total"] >= 1 and tests["failed"] == tests["errors"] == 0
    assert tests["passed"] + tests["skipped"] == tests["total"]
    assert all(Path(ROOT / f).is_file() for f in tests["files"])

    rows = report["newton_schulz"]["rows"]
    expected = {("ns", "torch", "float32"), ("ns", "torch_sym", "float32")}
    if HAS_TRITON:
        expected |= {("ns", "triton", "float32"), ("ns", "triton", "float16"),
                     ("gram", "triton", "float32"), ("gram", "triton", "float16")}
    assert expected <= {(r["op"], r["backend"], r["dtype"]) for r in rows}
    for r in rows:
        assert math.isfinite(r["rel_err_ns64"]), r
        if r["backend"] == "float64 reference":
            continue
        assert r["ms"] > 0 and r["tflops"] > 0 and r["flops"] > 0, r
        assert r["rel_err_ns64"] < (1e-5 if r["dtype"] == "float32" else 1e-2), r
        if r["op"] == "ns":
            assert 0 < r["sv_min"] <= r["sv_median"] <= r["sv_max"] < 1.5, r
        else:
            assert r["exactly_symmetric"] or r["backend"] == "torch", r

    (run,) = report["training"]["runs"]
    assert run["state"] == "COMPLETED" and "error" not in run, run
    assert run["tokens_per_s"] > 0 and run["first_step_s"] > 0 and run["micro_batch"] == 4
    assert run["predicted_gib"] > 0 and run["flops_per_token"] > 0
    assert run["peak_alloc_gib"] is None and run["mfu"] is None  # CPU: no CUDA memory, no peak


def test_launch_command_one_process_or_torchrun(tmp_path):
    spec = gpu_train.TrainSpec(preset="150M", dataset="d", out_dir=str(tmp_path))
    one = gpu_train.launch_command(spec, 1)
    assert one[0] == sys.executable and one[1].endswith("bench/gpu_train.py")
    assert gpu_train.TrainSpec(**json.loads(one[2])) == spec
    four = gpu_train.launch_command(spec, 4)
    assert four[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert four[5:] == one[1:]


def test_run_config_is_the_recipe_with_fsdp_and_compile(tmp_path):
    spec = gpu_train.TrainSpec(preset="600M", dataset="default", out_dir=str(tmp_path))
    cfg = gpu_train.run_config(spec)
    assert (cfg.data.seq_len, cfg.data.vocab_size, cfg.train.batch_size) == (4096, 128256, 64)
    assert cfg.train.parallelism == "fsdp" and cfg.train.compile
    assert cfg.train.precision == "bf16-autocast" and cfg.train.micro_batch_size == "auto"
    assert cfg.data.unique_tokens == 50 * 64 * 4096 and cfg.train.norms_every == 0


def test_peak_table_and_file_names():
    assert gpu_report.peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert gpu_report.peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert gpu_report.peak_tflops("NVIDIA H200") == 989.0
    assert gpu_report.peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert gpu_report.peak_tflops("Tesla T4") is None
    assert gpu_report.slug("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
