"""The device, its peak FLOP/s, and the report files of ``bench/gpu.py`` (JSON + markdown).

The peak dense bf16 FLOP/s per GPU and MFU are the train loop's (``scalelab.train.console.mfu``,
with the datasheets cited there): one table; a device not in it gets no MFU.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from scalelab.train.console.mfu import PEAK_BF16_TFLOPS, peak_tflops

__all__ = [
    "PEAK_BF16_TFLOPS", "device_info", "peak_tflops", "save", "slug", "timestamp", "to_markdown",
]

def slug(name: str) -> str:
    """A file-name-safe device name: 'NVIDIA H100 80GB HBM3' -> 'NVIDIA-H100-80GB-HBM3'."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") or "device"


def device_info(smoke: bool) -> dict[str, Any]:
    """Name, count, peak and software versions of the machine measured."""
    import torch

    from optim.kernels import HAS_TRITON

    cuda = torch.cuda.is_available() and not smoke
    name = torch.cuda.get_device_name(0) if cuda else "cpu-smoke"
    triton_version = None
    if HAS_TRITON:
        import triton

        triton_version = triton.__version__
    return {
        "name": name,
        "count": torch.cuda.device_count() if cuda else 0,
        "memory_gib": (torch.cuda.get_device_properties(0).total_memory / 2**30) if cuda else None,
        "peak_bf16_tflops": peak_tflops(name) if cuda else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version,
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return f"{value:,.0f}" if 1e3 <= abs(value) < 1e9 else f"{value:.3g}"
    lines = [line.strip() for line in str(value).splitlines() if line.strip()]
    return (lines[-1] if lines else "").replace("|", "\\|")  # a table cell: the last line


def _table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return lines


NS_COLUMNS = ["shape", "op", "backend", "dtype", "ms", "flops", "tflops", "rel_err_polar",
              "rel_err_ns64", "sv_min", "sv_median", "sv_max"]
TRAIN_COLUMNS = ["preset", "world_size", "micro_batch", "state", "tokens_per_s", "mfu",
                 "first_step_s", "peak_alloc_gib", "predicted_gib", "ratio_alloc_to_predicted",
                 "error"]


def to_markdown(report: dict[str, Any]) -> str:
    """The report as markdown: a header, then one table per section."""
    dev = report["device"]
    lines = [f"# GPU bench: {dev['name']} x{dev['count']} ({report['timestamp']})", "",
             (f"torch {dev['torch']}, CUDA {dev['cuda']}, triton {dev['triton']}; "
             f"peak bf16 {_fmt(dev['peak_bf16_tflops'])} TFLOP/s per GPU; mode {report['mode']}"),
             ""]
    tests = report["cuda_tests"]
    lines += ["## CUDA tests", "", f"`{tests['command']}`", "",
              *_table([tests], ["passed", "failed", "errors", "skipped", "total", "seconds"]), ""]
    ns = report["newton_schulz"]
    lines += ["## Newton-Schulz", "", *[f"- {note}" for note in ns["notes"]], "",
              *_table(ns["rows"], NS_COLUMNS), ""]
    tr = report["training"]
    lines += ["## Training", "", *[f"- {note}" for note in tr["notes"]], "",
              *_table(tr["runs"], TRAIN_COLUMNS), ""]
    if "precision" in report:
        pr = report["precision"]
        lines += ["## Quantized precisions", "", *[f"- {note}" for note in pr["notes"]], "",
                  *_table(pr["runs"], ["precision", "gemm_path", *TRAIN_COLUMNS[1:]]), ""]
    if report.get("errors"):
        lines += ["## Errors", "", *[f"```\n{e}\n```" for e in report["errors"]], ""]
    return "\n".join(lines)


def save(report: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write ``gpu-<device>-<timestamp>.json`` and ``.md`` under ``out_dir``; return both."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"gpu-{slug(report['device']['name'])}-{report['timestamp']}"
    json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    md_path.write_text(to_markdown(report) + "\n")
    return json_path, md_path


def timestamp() -> str:
    """Local time as YYYYmmdd-HHMMSS (sorts in time order in a file listing)."""
    return time.strftime("%Y%m%d-%H%M%S")
