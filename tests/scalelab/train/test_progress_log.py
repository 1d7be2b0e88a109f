"""Progress lines: pure formatting (text and JSON), the settings from flags and environment,
quiet mode, throughput/ETA from injected times (no sleeps, no wall clock), and MFU only
where a GPU's peak is known."""

from __future__ import annotations

import json

import pytest
import torch

from scalelab.errors import UserError
from scalelab.train.console.console import Console
from scalelab.train.console.mfu import device_peak_flops, mfu, peak_tflops
from scalelab.train.console.progress_log import (
    EvalLine,
    LogSettings,
    ProgressLine,
    eval_line,
    format_duration,
    format_rate,
    message_line,
    progress_line,
)
from scalelab.train.console.progress_meter import ProgressMeter

KEYS = {"event", "run_id", "step", "total_steps", "loss", "tokens_per_s", "mfu", "eta_s",
        "elapsed_s"}


def _line(**kw) -> ProgressLine:
    base = {"step": 120, "total_steps": 1000, "loss": 3.21449, "tokens_per_s": 45213.0,
            "mfu": None, "eta_s": 460.0, "elapsed_s": 62.0}
    return ProgressLine(**{**base, **kw})


def test_text_progress_line():
    assert progress_line(_line(), "text", "ab12cd34") == (
        "[ab12cd34] step 120/1000 loss 3.2145 | 45.2k tok/s | elapsed 1m02s | eta 7m40s")
    with_mfu = progress_line(_line(mfu=0.3851, tokens_per_s=1.31e6), "text", "r")
    assert with_mfu == "[r] step 120/1000 loss 3.2145 | 1.31M tok/s | mfu 38.5% | elapsed 1m02s | eta 7m40s"
    unknown = progress_line(_line(tokens_per_s=None, eta_s=None), "text", "r")
    assert "? tok/s" in unknown and unknown.endswith("eta ?") and "mfu" not in unknown


def test_json_progress_line_has_the_documented_keys():
    doc = json.loads(progress_line(_line(), "json", "ab12cd34"))
    assert set(doc) == KEYS
    assert doc == {"event": "progress", "run_id": "ab12cd34", "step": 120, "total_steps": 1000,
                   "loss": 3.21449, "tokens_per_s": 45213.0, "mfu": None, "eta_s": 460.0,
                   "elapsed_s": 62.0}
    # strict JSON: a non-finite loss is null, never NaN (which json.loads would accept)
    line = progress_line(_line(loss=float("nan"), mfu=0.5), "json", "r")
    assert "NaN" not in line and json.loads(line)["loss"] is None and json.loads(line)["mfu"] == 0.5


def test_eval_and_message_lines():
    e = EvalLine(step=5, total_steps=12, val_loss=3.91013, train_loss=4.26597, elapsed_s=0.34)
    assert eval_line(e, "text", "r") == "[r] step 5/12 train 4.2660 val 3.9101 (0.3s)"
    first = EvalLine(step=0, total_steps=12, val_loss=5.5, train_loss=None, elapsed_s=0.0)
    assert eval_line(first, "text", "r") == "[r] step 0/12 val 5.5000 (0.0s)"
    assert json.loads(eval_line(first, "json", "r")) == {
        "event": "eval", "run_id": "r", "step": 0, "total_steps": 12, "train_loss": None,
        "val_loss": 5.5, "elapsed_s": 0.0}
    assert message_line("resumed from checkpoint at step 4/12", "text", "r") == \
        "[r] resumed from checkpoint at step 4/12"
    assert json.loads(message_line('say "hi"\n', "json", "r")) == {
        "event": "message", "run_id": "r", "message": 'say "hi"\n'}


@pytest.mark.parametrize("seconds,shown", [
    (None, "?"), (-1.0, "?"), (float("inf"), "?"), (0.4, "0s"), (42, "42s"), (425, "7m05s"),
    (3600 * 3 + 125, "3h02m"), (86400 * 2 + 3600 * 4, "2d04h"),
])
def test_format_duration(seconds, shown):
    assert format_duration(seconds) == shown


@pytest.mark.parametrize("value,shown", [
    (None, "?"), (812.4, "812"), (45213.0, "45.2k"), (1.31e6, "1.31M"), (2.5e9, "2.5G"),
])
def test_format_rate(value, shown):
    assert format_rate(value) == shown


def test_settings_from_env_and_flags():
    assert LogSettings.from_env({}) == LogSettings("text", False)
    env = {"SCALELAB_LOG_FORMAT": "JSON", "SCALELAB_QUIET": "1"}
    assert LogSettings.from_env(env) == LogSettings("json", True)
    assert LogSettings.from_env({"SCALELAB_QUIET": "false"}).quiet is False
    # flags win over the environment; a flag not given keeps it
    assert LogSettings.from_env(env).overridden(fmt="text") == LogSettings("text", True)
    assert LogSettings.from_env({}).overridden(quiet=True) == LogSettings("text", True)
    with pytest.raises(UserError, match="SCALELAB_LOG_FORMAT: must be one of text, json"):
        LogSettings.from_env({"SCALELAB_LOG_FORMAT": "xml"})
    with pytest.raises(UserError, match="SCALELAB_QUIET"):
        LogSettings.from_env({"SCALELAB_QUIET": "maybe"})
    with pytest.raises(UserError, match="--log-format: must be one of"):
        LogSettings().overridden(fmt="yaml")


def test_console_quiet_keeps_messages_only(capsys):
    line = _line()
    e = EvalLine(step=5, total_steps=12, val_loss=3.9, train_loss=4.2, elapsed_s=0.3)
    for settings in (LogSettings("text", True), LogSettings("json", True)):
        c = Console(settings, "r")
        c.progress(line)
        c.eval(e)
        c.message("preempted (SIGTERM) at step 3; checkpoint written")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[r] preempted (SIGTERM) at step 3; checkpoint written"
    assert json.loads(out[1])["event"] == "message" and len(out) == 2
    loud = Console(LogSettings("json"), "r")
    loud.progress(line)
    loud.eval(e)
    assert [json.loads(x)["event"] for x in capsys.readouterr().out.splitlines()] == ["progress", "eval"]
    Console(LogSettings("text"), "r", enabled=False).message("rank 1 says nothing")
    assert capsys.readouterr().out == ""


def test_meter_window_rate_and_eta_from_injected_times():
    m = ProgressMeter(total_steps=100, tokens_per_step=1000, flops_per_token=6e6,
                      peak_flops=None, start_step=20, start_time=50.0)
    for _ in range(10):
        m.add_step(0.5)
    line = m.line(30, 2.5, now=60.0, elapsed_s=130.0)  # 10 steps of 0.5 s in 10 s of wall time
    assert line.tokens_per_s == pytest.approx(10 * 1000 / 5.0)  # step time only: evals left out
    assert line.eta_s == pytest.approx(70 * (10.0 / 10))  # 70 steps left at 1 s per step
    assert line.elapsed_s == 130.0 and line.mfu is None and line.loss == 2.5
    # a new window: only the steps since the previous line
    for _ in range(5):
        m.add_step(0.25)
    line = m.line(35, 2.4, now=70.0, elapsed_s=140.0)
    assert line.tokens_per_s == pytest.approx(5 * 1000 / 1.25)
    assert line.eta_s == pytest.approx(65 * (20.0 / 15))
    assert m.line(35, 2.4, now=70.0, elapsed_s=140.0).tokens_per_s is None  # empty window
    assert m.line(100, 2.0, now=120.0, elapsed_s=190.0).eta_s == 0.0


def test_meter_mfu_when_the_peak_is_known():
    m = ProgressMeter(total_steps=10, tokens_per_step=4096, flops_per_token=1e9,
                      peak_flops=989e12, start_step=0, start_time=0.0)
    m.add_step(0.01)
    line = m.line(1, 3.0, now=0.01, elapsed_s=0.01)
    assert line.mfu == pytest.approx(4096 / 0.01 * 1e9 / 989e12)


def test_mfu_only_on_known_gpus():
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA H100 NVL") == 835.0
    assert peak_tflops("NVIDIA H200") == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("Tesla T4") is None
    assert device_peak_flops(torch.device("cpu"), world_size=8) is None  # never on CPU
    assert mfu(1e5, 6e6, None) is None and mfu(None, 6e6, 1e15) is None
    assert mfu(1e5, 6e6, 1e12) == pytest.approx(0.6)


@pytest.mark.cuda
def test_device_peak_on_this_gpu():
    peak = device_peak_flops(torch.device("cuda", 0), world_size=2)
    known = peak_tflops(torch.cuda.get_device_name(0))
    assert peak == (None if known is None else known * 1e12 * 2)
