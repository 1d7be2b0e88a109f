"""Everything that needs a GPU, in one command ("GPU truth": every GPU path run on a GPU).

    python bench/gpu.py                 # on a CUDA machine: measure, print, save
    python bench/gpu.py --cpu-smoke     # every code path at toy sizes on the CPU (no numbers)

On a CUDA machine it runs, prints, and saves under ``bench/results/`` as
``gpu-<device name>-<timestamp>.json`` and ``.md`` (``gpu_report``):

1. the CUDA tests: pytest ``-m cuda`` on the test files that carry the ``cuda`` marker
   (tests/conftest.py skips them without a GPU), with pass/fail counts from a JUnit XML;
2. Newton-Schulz (``gpu_ns``): the torch, torch_sym and Triton backends in bf16 and the
   Triton symmetric Gram kernel, square 1024..8192 and d x 3.5d, for accuracy against a
   float64 SVD polar factor and for speed (CUDA events, median, TFLOP/s);
3. training (``gpu_train``): the 150M and 600M presets, 50 steps of the
   sweeps/200M_tokens.yaml recipe with FSDP2 on every visible GPU (torchrun if more than
   one), bf16 autocast and compile: tokens/s after 10 warm-up steps, MFU, time to the
   first step, peak memory against ``scalelab.model.memory``'s prediction;
4. quantized precisions (``run_precision``): fp8, mxfp8, mxfp4 and nvfp4 training on the
   smallest preset, which no GPU has run yet: state, tokens/s and the GEMM path recorded.

Without CUDA it prints "no CUDA device: nothing measured" and exits 0. ``--cpu-smoke``
runs all three on the CPU at toy sizes: the pytest run (every test skipped), NS with the
torch backends in fp32 and, when triton is installed, the Triton kernels under
``TRITON_INTERPRET=1`` in fp32 and fp16 (the interpreter mishandles bf16), and a cpu-50k
training run of 3 steps without compile. Its report goes to a temporary folder unless
``--out`` is given. Exit status 1 when a section failed (its error is in the report).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NO_CUDA = "no CUDA device: nothing measured"


def cuda_test_files() -> list[Path]:
    """Test files that use the ``cuda`` marker (``@pytest.mark.cuda``)."""
    return sorted(p for p in (REPO / "tests").rglob("test_*.py")
                  if "pytest.mark.cuda" in p.read_text(errors="replace"))


def run_cuda_tests(work: Path) -> dict[str, Any]:
    """pytest ``-m cuda`` on ``cuda_test_files``; counts from its JUnit XML."""
    files = [str(p.relative_to(REPO)) for p in cuda_test_files()]
    xml = work / "cuda-tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cuda",
           f"--junitxml={xml}", *files]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    shown = " ".join(["pytest -q -p no:cacheprovider -m cuda", *files])
    result: dict[str, Any] = {"command": shown, "files": files, "rc": proc.returncode,
                              "seconds": time.perf_counter() - t0}
    counts = {"total": 0, "failed": 0, "errors": 0, "skipped": 0}
    if xml.is_file():
        for suite in ET.parse(xml).getroot().iter("testsuite"):
            for key, attr in (("total", "tests"), ("failed", "failures"), ("errors", "errors"),
                              ("skipped", "skipped")):
                counts[key] += int(suite.get(attr, 0))
    counts["passed"] = counts["total"] - counts["failed"] - counts["errors"] - counts["skipped"]
    result.update(counts)
    if proc.returncode not in (0, 5):  # 5: nothing collected
        result["error"] = proc.stdout.strip()[-2000:]
    return result


def run_newton_schulz(args: argparse.Namespace, smoke: bool) -> dict[str, Any]:
    """Accuracy and speed rows of every shape (``gpu_ns.bench_shape``)."""
    import torch
    from gpu_ns import NS_NOTES, bench_shape, default_shapes

    from optim.kernels import HAS_TRITON

    device = torch.device("cpu" if smoke else "cuda")
    if smoke:
        shapes = [(48, 80), (64, 64)]
        cases = [("torch", torch.float32), ("torch_sym", torch.float32)]
        if HAS_TRITON:  # the CPU interpreter (TRITON_INTERPRET=1): fp32 and fp16, not bf16
            cases += [("triton", torch.float32), ("triton", torch.float16)]
    else:
        shapes = ([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
                  if args.shapes else default_shapes())
        cases = [(b, torch.bfloat16) for b in ("torch", "torch_sym", "triton")]
    rows, errors = [], []
    for m, n in shapes:
        try:
            rows += bench_shape(m, n, cases, steps=args.ns_steps, warmup=args.warmup,
                                reps=args.reps, device=device)
            print(f"  NS {m}x{n}: done", flush=True)
        except Exception as err:  # noqa: BLE001 - one shape (e.g. out of memory) loses its rows
            errors.append(f"NS {m}x{n}: {type(err).__name__}: {err}"[:500])
            print(f"  {errors[-1]}", flush=True)
    notes = [*NS_NOTES, f"{args.ns_steps} steps, warm-up {args.warmup}, {args.reps} timed repeats"]
    if smoke:
        notes.append("CPU smoke: toy shapes; Triton under TRITON_INTERPRET=1 (fp32, fp16)")
    return {"notes": notes, "rows": rows, "errors": errors}


def run_training(args: argparse.Namespace, smoke: bool, work: Path) -> dict[str, Any]:
    """One row per preset (``gpu_train.launch``), on synthetic tokens shared by the runs."""
    import torch
    from gpu_train import TrainSpec, launch, run_config, synthetic_data

    nproc = 1 if smoke else max(torch.cuda.device_count(), 1)
    presets = ["cpu-50k"] if smoke else args.presets.split(",")
    size = {"steps": 3, "warmup_steps": 1, "batch_size": 4, "seq_len": 32, "vocab_size": 256,
            "compile": False, "device": "cpu"} if smoke else {
        "steps": args.steps, "warmup_steps": args.warmup_steps, "batch_size": args.batch,
        "compile": True, "device": "cuda"}
    probe = run_config(TrainSpec(preset=presets[0], dataset="default", out_dir=str(work / "probe"),
                                 **size))
    vocab, seq, batch = probe.data.vocab_size, probe.data.seq_len, probe.train.batch_size
    data = synthetic_data(work / "data", vocab=vocab, steps=size["steps"], batch=batch, seq=seq)
    runs = []
    for preset in presets:
        spec = TrainSpec(preset=preset, dataset=str(data), out_dir=str(work / preset), **size)
        print(f"  training {preset} on {nproc} process(es)...", flush=True)
        row = launch(spec, nproc)
        print(f"  {preset}: {row.get('state')}" + (f" ({row['error'][-300:]})"
                                                   if row.get("error") else ""), flush=True)
        runs.append(row)
    notes = [
        (f"recipe: sweeps/200M_tokens.yaml base (seq {seq}, vocab {vocab:,}, batch {batch}, "
        f"{probe.train.precision}, {probe.optim.name}, micro_batch_size "
        f"{probe.train.micro_batch_size}), train.parallelism fsdp on {nproc} process(es), "
        f"compile {size['compile']}"),
        (f"data: synthetic uniform token ids (the embedded corpus is byte-level, vocab 256), "
        f"{size['steps']} steps"),
        (f"tokens_per_s: steps {size['warmup_steps'] + 1}..{size['steps']} (the first "
        f"{size['warmup_steps']} are warm-up/compile), clock synchronised after the "
        "optimizer step"),
        ("mfu: tokens_per_s / world_size x flops_per_token (scalelab.model.counts) / peak "
        "(gpu_report.PEAK_BF16_TFLOPS)"),
        ("first_step_s: train() call to the end of step 1 (with_imports: from the process's "
        "imports)"),
        ("peak_alloc_gib: max over ranks of torch.cuda.max_memory_allocated; predicted_gib: "
        "scalelab.model.memory.estimate via micro_batch (includes RUNTIME_GIB); ratio: "
        "alloc / (predicted - RUNTIME_GIB)"),
    ]
    return {"notes": notes, "runs": runs,
            "errors": [f"train {r['preset']}: {r['error']}"[:2000] for r in runs if r.get("error")]}


QUANT_PRECISIONS = ("fp8", "mxfp8", "mxfp4", "nvfp4")
"""train.precision values whose GEMMs are quantized (scalelab.quant): never yet run on a GPU."""


def run_precision(args: argparse.Namespace, smoke: bool, work: Path) -> dict[str, Any]:
    """The quantized precisions on the GPU, never run there before: the smallest preset of
    ``--presets`` (smoke: cpu-50k) for ``--steps`` steps in each, without compile (QuantLinear
    under compile and FSDP2 is untested), rows as ``run_training``'s plus the GEMM path
    ``meta.json`` records ("emulated", or torchao's when wired)."""
    import json

    import torch
    from gpu_train import TrainSpec, launch, run_config, synthetic_data

    nproc = 1 if smoke else max(torch.cuda.device_count(), 1)
    preset = "cpu-50k" if smoke else args.presets.split(",")[0]
    size = {"steps": 3, "warmup_steps": 1, "batch_size": 4, "seq_len": 32, "vocab_size": 256,
            "compile": False, "device": "cpu"} if smoke else {
        "steps": args.steps, "warmup_steps": args.warmup_steps, "batch_size": args.batch,
        "compile": False, "device": "cuda"}
    probe = run_config(TrainSpec(preset=preset, dataset="default", out_dir=str(work / "qprobe"), **size))
    data = synthetic_data(work / "qdata", vocab=probe.data.vocab_size, steps=size["steps"],
                          batch=probe.train.batch_size, seq=probe.data.seq_len)
    runs = []
    for precision in QUANT_PRECISIONS:
        out = work / f"q-{precision}"
        spec = TrainSpec(preset=preset, dataset=str(data), out_dir=str(out), precision=precision, **size)
        print(f"  {preset} {precision} on {nproc} process(es)...", flush=True)
        row = {**launch(spec, nproc), "precision": precision}
        meta = next(out.rglob("meta.json"), None)
        row["gemm_path"] = json.loads(meta.read_text()).get("gemm_path") if meta else None
        print(f"  {precision}: {row.get('state')} ({row['gemm_path']})", flush=True)
        runs.append(row)
    notes = [f"quantized GEMMs (scalelab.quant) on {preset}, {size['steps']} steps, compile off, "
             f"fsdp on {nproc} process(es); never run on a GPU before this section (docs/precision.md)"]
    return {"notes": notes, "runs": runs,
            "errors": [f"precision {r['precision']}: {r['error']}"[:2000] for r in runs if r.get("error")]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-smoke", action="store_true", help="every code path, toy sizes, CPU")
    ap.add_argument("--out", type=Path, default=None,
                    help="report folder (default bench/results; a temp folder with --cpu-smoke)")
    ap.add_argument("--only", default="tests,ns,train,precision", help="sections to run (comma list)")
    ap.add_argument("--shapes", default=None, help="NS shapes, e.g. 1024x1024,1024x3584")
    ap.add_argument("--ns-steps", type=int, default=None, help="NS steps (5; smoke 2)")
    ap.add_argument("--warmup", type=int, default=None, help="NS warm-up calls (3; smoke 1)")
    ap.add_argument("--reps", type=int, default=None, help="NS timed repeats (20; smoke 2)")
    ap.add_argument("--presets", default="150M,600M")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=None, help="global batch (the recipe's: 64)")
    args = ap.parse_args(argv)
    smoke = args.cpu_smoke
    for key, gpu, cpu in (("ns_steps", 5, 2), ("warmup", 3, 1), ("reps", 20, 2)):
        if getattr(args, key) is None:
            setattr(args, key, cpu if smoke else gpu)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    smoke = args.cpu_smoke
    if smoke:  # before optim.kernels.ns_kernels is imported: the kernels read it when defined
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    if not smoke and not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    from gpu_report import device_info, save, timestamp, to_markdown

    sections = set(args.only.split(","))
    report: dict[str, Any] = {"mode": "cpu-smoke" if smoke else "gpu", "timestamp": timestamp(),
                              "device": device_info(smoke)}
    print(f"bench/gpu.py: {report['device']['name']} x{report['device']['count']} "
          f"({report['mode']})", flush=True)
    with tempfile.TemporaryDirectory(prefix="scalelab-gpu-bench-") as tmp:
        work = Path(tmp)
        empty_tests = {"command": "-", "passed": 0, "failed": 0, "errors": 0, "skipped": 0,
                       "total": 0, "seconds": 0.0, "not_run": True}
        print("CUDA tests...", flush=True)
        report["cuda_tests"] = run_cuda_tests(work) if "tests" in sections else empty_tests
        print("Newton-Schulz...", flush=True)
        report["newton_schulz"] = (run_newton_schulz(args, smoke) if "ns" in sections
                                   else {"notes": ["not run"], "rows": [], "errors": []})
        print("training...", flush=True)
        report["training"] = (run_training(args, smoke, work) if "train" in sections
                              else {"notes": ["not run"], "runs": [], "errors": []})
        print("quantized precisions...", flush=True)
        report["precision"] = (run_precision(args, smoke, work) if "precision" in sections
                               else {"notes": ["not run"], "runs": [], "errors": []})
    errors = [*report["newton_schulz"]["errors"], *report["training"]["errors"],
              *report["precision"]["errors"]]
    if report["cuda_tests"].get("error") or report["cuda_tests"]["failed"]:
        errors.append(f"CUDA tests: {report['cuda_tests']['failed']} failed, "
                      f"{report['cuda_tests']['errors']} errors (see the JSON)")
    report["errors"] = errors
    out = args.out or (Path(tempfile.mkdtemp(prefix="scalelab-gpu-smoke-")) if smoke
                       else REPO / "bench" / "results")
    json_path, md_path = save(report, out)
    print(to_markdown(report))
    print(f"saved {json_path} and {md_path}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
