"""Numbers that size work or memory are bounded by what they multiply, and refused in one
line (exit 2) before any work: ``train.eval_batches`` by the validation split's windows,
``scalelab ensemble --batches`` / ``--batch-size`` by the split's windows, ``--device`` by
the trainer's device rule (issue 36: ``train.eval_batches=100000000`` reached 24 GB,
``ensemble --batches 100000000`` 8 GB, ``--batch-size 100000`` 3.1 GB,
``--batch-size 99999999999999999999`` and ``--device nan`` gave tracebacks).

The memory cases run the real CLI in a subprocess under ``test_blowups``' 1 GiB address-space
cap and report its peak resident memory (``resource.getrusage(RUSAGE_CHILDREN)``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from test_bad_input import assert_one_line
from test_blowups import PEAK_KIB, capped_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _fuzz import run_cli  # noqa: E402

from scalelab.config import RunConfig, load_run_config, val_windows_limit  # noqa: E402
from scalelab.errors import UserError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TRAIN_CPU = REPO / "sweeps" / "examples" / "train_cpu.yaml"
VAL_TOKENS, SEQ_LEN = 300, 8
WINDOWS = VAL_TOKENS // (SEQ_LEN + 1)
"""The ensemble sweep's validation split: 300 tokens (no separators), 33 windows of 9."""


def ensemble_sweep(root: Path) -> Path:
    """A sweep directory holding one ensemble group: two COMPLETED cpu-50k members
    (``test_ensemble._member_run``: vocab 32, batch 4, eval_batches 3) on a 3,000-token
    corpus whose validation split holds ``WINDOWS`` windows."""
    from test_ensemble import _member_run

    from scalelab.data.format import write_token_dir

    corpus = write_token_dir(root / "corpus", np.random.default_rng(0).integers(0, 32, 3000), vocab_size=32,
                             tokenizer_id="t", eos_id=None, n_documents=1, sources=["rng"])
    sweep = root / "ensemble_sweep"
    for k in (0, 1):
        _member_run(sweep, k, str(corpus))
    return sweep


def test_eval_batches_is_bounded_by_the_validation_windows():
    default = RunConfig()
    limit = val_windows_limit(default.data)
    assert limit == 2 * 65536 // 129 == 1016
    assert load_run_config(None, [f"train.eval_batches={limit}"]).train.eval_batches == limit
    with pytest.raises(UserError) as err:
        load_run_config(None, ["train.eval_batches=100000000"])
    assert str(err.value) == (
        "override 'train.eval_batches=100000000': train.eval_batches: eval_batches=100000000 is "
        "more than 1,016, the windows of the validation split (2 * data.val_tokens // "
        "(data.seq_len + 1)): the batches wrap round it, so further ones repeat earlier ones")
    # A smaller split, a smaller bound: 2 * 1024 // 17 = 120 windows.
    with pytest.raises(UserError, match="eval_batches=121 is more than 120"):
        load_run_config(None, ["data.val_tokens=1024", "data.seq_len=16", "train.eval_batches=121"])

    # The bound's reason, on the real batches: with W windows, batch k + W is batch k.
    from scalelab.data.dataset import TokenDataset
    from scalelab.data.stream import val_batches

    val = np.arange(100, dtype=np.uint16)
    ds = TokenDataset(path=Path("."), vocab_size=100, tokenizer_id="t", eos_id=None, train=val[:0],
                      val=val, split=0, meta={})
    w = len(val) // (SEQ_LEN + 1)  # 11
    batches = list(val_batches(ds, SEQ_LEN, 3, 2 * w))
    assert all(np.array_equal(batches[k][0], batches[k + w][0]) for k in range(w))
    assert len({b[0].numpy().tobytes() for b in batches}) == w


def test_a_plan_refuses_eval_batches_past_the_windows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "evals", "base": {"data": {"vocab_size": 256, "unique_tokens": 4096}},
                                    "grid": {"train.eval_batches": [8, 100000000]}}))
    outcome = run_cli(["sweep", str(spec), "--dry-run", "--root", str(tmp_path / "root")])
    assert outcome.code == 2 and not outcome.escaped, outcome.describe([])
    assert "run 'eval_batches100M': eval_batches=100000000 is more than 1,016" in outcome.stderr


def test_train_refuses_huge_eval_batches_before_any_work(tmp_path):
    proc, peak = capped_cli(tmp_path, "train", TRAIN_CPU, "train.eval_batches=100000000",
                            "--run-dir", tmp_path / "run")
    assert_one_line(proc, "override 'train.eval_batches=100000000': train.eval_batches:",
                    "is more than 1,016, the windows of the validation split")
    assert peak < PEAK_KIB, peak
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    return ensemble_sweep(tmp_path_factory.mktemp("bounded"))


@pytest.mark.parametrize(("option", "value", "needle"), [
    ("--batches", "100000000", f"--batches: expected 1 to {WINDOWS} batches (the windows of the validation split"),
    ("--batch-size", "100000", f"--batch-size: expected 1 to {WINDOWS} sequences (the {WINDOWS} windows"),
])
def test_ensemble_sizes_are_refused_with_bounded_memory(tmp_path, sweep, option, value, needle):
    proc, peak = capped_cli(tmp_path, "ensemble", sweep, "--device", "cpu", option, value)
    assert_one_line(proc, needle, f"got {value}")
    assert peak < PEAK_KIB, peak
    assert not (sweep / "ensembles").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--batch-size", "99999999999999999999"], "--batch-size: expected 1 to 33 sequences"),
    (["--batches", str(WINDOWS + 1)], f"--batches: expected 1 to {WINDOWS} batches"),
    (["--batch-size", "0"], "Invalid value for '--batch-size'"),
    (["--device", "nan"], "--device: device 'nan' is unknown: expected auto, cpu, cuda or cuda:N"),
    (["--device", ""], "--device: device '' is unknown"),
    (["--device", "-1"], "--device: device '-1' is unknown"),
    (["--device", "cdua"], "(did you mean 'cuda'?)"),
    (["--device", "cuda:x"], "--device: device 'cuda:x' is unknown"),
])
def test_ensemble_refuses_bad_sizes_and_devices_in_one_line(tmp_path, monkeypatch, sweep, args, needle):
    monkeypatch.chdir(tmp_path)
    outcome = run_cli(["ensemble", str(sweep), "--device", "cpu", *args])
    assert outcome.code == 2 and not outcome.escaped, outcome.describe(args)
    assert needle in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1, outcome.stderr


@pytest.mark.parametrize("option", ["--batches", "--batch-size"])
def test_ensemble_bounds_are_exact(tmp_path, monkeypatch, sweep, option):
    """W (the split's windows) runs; W + 1 is refused before any member is loaded."""
    monkeypatch.chdir(tmp_path)
    other = ["--batch-size", "1"] if option == "--batches" else ["--batches", "1"]
    outcome = run_cli(["ensemble", str(sweep), "--device", "cpu", option, str(WINDOWS), *other])
    assert outcome.code == 0, outcome.describe([])
    table = pl.read_parquet(sweep / "ensembles" / "evals.parquet")
    assert table.filter(pl.col("method") == "logits")["members"].to_list() == [1, 2]
    outcome = run_cli(["ensemble", str(sweep), "--device", "cpu", option, str(WINDOWS + 1), *other])
    assert outcome.code == 2 and f"{option}: expected 1 to {WINDOWS} " in outcome.stderr, outcome.stderr


def test_the_trainer_device_rule_is_the_config_rule():
    with pytest.raises(UserError, match=r"^override 'train.device=cdua': train.device: device 'cdua' "
                                        r"is unknown: expected auto, cpu, cuda or cuda:N \(did you mean 'cuda'\?\)$"):
        load_run_config(None, ["train.device=cdua"])
    assert load_run_config(None, ["train.device=cuda:1"]).train.device == "cuda:1"


def test_newton_schulz_steps_and_prompt_len_are_bounded():
    from scalelab.config import NS_STEPS_LIMIT

    assert load_run_config(None, [f"optim.ns_steps={NS_STEPS_LIMIT}"]).optim.ns_steps == 100
    with pytest.raises(UserError, match=r"optim.ns_steps: 100000000 is out of range: expected in \[1, 100\]"):
        load_run_config(None, ["optim.ns_steps=100000000"])
    assert load_run_config(None, ["distill.prompt_len=128"]).distill.prompt_len == 128
    with pytest.raises(UserError, match=r"distill.prompt_len: prompt_len=129 is more than data.seq_len=128"):
        load_run_config(None, ["distill.prompt_len=129"])


def test_a_model_past_the_memory_is_one_line(tmp_path):
    """A shape no single field's bound can know is too large (d_model 100,000: 40 GB per
    attention matrix) fails its allocation: one line naming the cause, exit 2."""
    import json
    import subprocess

    from test_blowups import _CAPPED

    cap = 3 << 30  # under 1 GiB torch's threads crash before the allocation is tried
    request = json.dumps([cap, ["train", str(TRAIN_CPU), "model.d_model=100000", "--run-dir",
                                str(tmp_path / "run"), "-q"], {"OMP_NUM_THREADS": "1"}])
    out = subprocess.run([sys.executable, "-c", _CAPPED, request], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=600)
    code, stdout, stderr, peak = json.loads(out.stdout)
    proc = subprocess.CompletedProcess([], code, stdout, stderr)
    assert_one_line(proc, "out of memory (", "can't allocate memory",
                    "lower the sizes that multiply into it (model shape, batch, sequence length)")
    assert peak < 1 << 20, peak  # KiB: the embedding (100 MB) is allocated, the 40 GB matrix never


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
@pytest.mark.parametrize("command", ["report", "compare"])
def test_ref_wd_is_a_finite_weight_decay(tmp_path, monkeypatch, command, value):
    """nan matched no run, so every block silently counted as another recipe (exit 0)."""
    from test_disk_full import TABLE

    monkeypatch.chdir(tmp_path)
    table = tmp_path / "runs.csv"
    table.write_text(TABLE)
    args = {"report": ["report", str(table), "-q", "--bootstrap", "0"],
            "compare": ["compare", str(table), "a", "b", "--n-boot", "20"]}[command]
    outcome = run_cli([*args, "--ref-wd", value])
    assert outcome.code == 2 and not outcome.escaped, outcome.describe([])
    assert outcome.stderr.strip() == (f"error: --ref-wd: expected a weight decay: a finite number >= 0, "
                                      f"got {float(value)}")


def test_tune_trials_are_bounded_before_the_spec_is_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outcome = run_cli(["tune", str(tmp_path / "missing.yaml"), "--n-trials", "100000000"])
    assert outcome.code == 2 and not outcome.escaped, outcome.describe([])
    assert "Invalid value for '--n-trials'" in outcome.stderr and "10000" in outcome.stderr


def test_the_resample_bound_in_the_help_is_the_one_enforced():
    from analysis.fit.bootstrap import MAX_RESAMPLES
    from scalelab.cli.resamples import BOOTSTRAP_HELP

    assert f"2 to {MAX_RESAMPLES:,}" in BOOTSTRAP_HELP
