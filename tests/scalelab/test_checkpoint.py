"""Checkpoints: the manifest written last, verification and fallback on load, the pruning
rule, weights-only loading (RNG states, every optimizer), code-running pickles refused."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pytest
import torch
from _train_util import write_malicious_checkpoint

from scalelab.config import load_run_config
from scalelab.errors import UserError
from scalelab.model import build_model
from scalelab.train.checkpoint import directory as ckpt
from scalelab.train.checkpoint.manifest import FORMAT, FileDigest, check_manifest, manifest_doc
from scalelab.train.optimizers import build_optimizer


def _state(step: int) -> dict:
    return {"step": step, "w": torch.full((64, 64), float(step)), "rng": ckpt.rng_state()}


def _dir(run_dir, step: int):
    return run_dir / "checkpoint" / f"step-{step:09d}"


def test_manifest_is_written_with_the_size_and_sha256_of_state_pt(tmp_path):
    path = ckpt.save_checkpoint(tmp_path, 5, _state(5))
    assert sorted(p.name for p in path.iterdir()) == ["manifest.json", "state.pt"]
    data = (path / "state.pt").read_bytes()
    doc = json.loads((path / "manifest.json").read_text())
    assert doc == {"format": FORMAT, "step": 5, "files": {"state.pt": {
        "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}}
    assert torch.equal(ckpt.load_checkpoint(tmp_path)["w"], torch.full((64, 64), 5.0))


def _truncate(d):
    with open(d / "state.pt", "r+b") as fh:
        fh.truncate(1000)


def _flip_a_byte(d):
    data = bytearray((d / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0x01
    (d / "state.pt").write_bytes(bytes(data))


def _manifest_of_another_step(d):
    doc = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**doc, "step": 1}))


CORRUPTIONS = {
    "truncated": (_truncate, r"state.pt: 1000 bytes, manifest says \d+"),
    "bit flip": (_flip_a_byte, "state.pt: sha256 mismatch"),
    "no manifest": (lambda d: (d / "manifest.json").unlink(), "no manifest.json"),
    "garbled manifest": (lambda d: (d / "manifest.json").write_text("{"),
                         r"manifest.json unreadable \(JSONDecodeError\)"),
    "manifest of another step": (_manifest_of_another_step, "manifest.json is for step 1"),
    "no state.pt": (lambda d: (d / "state.pt").unlink(), "state.pt missing"),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_a_corrupt_newest_checkpoint_falls_back_to_the_older_one_in_one_line(tmp_path, kind):
    import re

    corrupt, reason = CORRUPTIONS[kind]
    for step in (4, 8):
        ckpt.save_checkpoint(tmp_path, step, _state(step))
    corrupt(_dir(tmp_path, 8))
    lines: list[str] = []
    state = ckpt.load_checkpoint(tmp_path, log=lines.append, set_aside=True)
    assert state["step"] == 4
    assert len(lines) == 1
    want = rf"checkpoint step-000000008 is corrupt \({reason}\); resuming from step-000000004"
    assert re.fullmatch(want, lines[0]), lines[0]
    # set aside, not deleted: a later save's pruning cannot count it
    assert not _dir(tmp_path, 8).exists()
    assert (tmp_path / "checkpoint" / "corrupt-step-000000008").is_dir()
    assert ckpt.latest_step(tmp_path) == 4


def test_no_intact_checkpoint_means_none_and_one_line_naming_them_all(tmp_path):
    for step in (4, 8):
        ckpt.save_checkpoint(tmp_path, step, _state(step))
        _truncate(_dir(tmp_path, step))
    lines: list[str] = []
    assert ckpt.load_checkpoint(tmp_path, log=lines.append) is None
    assert len(lines) == 1
    assert lines[0].startswith("checkpoints step-000000008 (state.pt: 1000 bytes")
    assert ", step-000000004 (state.pt: 1000 bytes" in lines[0]
    assert lines[0].endswith("are corrupt; no intact checkpoint: starting from scratch")
    assert _dir(tmp_path, 8).is_dir()  # without set_aside nothing moves


def test_a_killed_write_leaves_only_a_tmp_dir_that_load_removes(tmp_path):
    ckpt.save_checkpoint(tmp_path, 4, _state(4))
    tmp = tmp_path / "checkpoint" / ".tmp-step-000000008-123"
    tmp.mkdir()
    (tmp / "state.pt").write_bytes(b"PK\x03\x04 partial")
    lines: list[str] = []
    assert ckpt.load_checkpoint(tmp_path, log=lines.append)["step"] == 4
    assert lines == [] and not tmp.exists()


def test_pruning_never_removes_the_intact_checkpoint_below_a_corrupt_newer_one(tmp_path):
    """keep=1, a corrupt step 8 left in place (a reader that does not set aside): saving 6
    keeps 6 and leaves 8 alone; the old rule (newest ``keep`` of all) kept only the corrupt 8."""
    for step in (4, 8):
        ckpt.save_checkpoint(tmp_path, step, _state(step))
    _truncate(_dir(tmp_path, 8))
    assert ckpt.load_checkpoint(tmp_path, log=lambda _: None)["step"] == 4
    ckpt.save_checkpoint(tmp_path, 6, _state(6), keep=1)
    names = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert names == ["step-000000006", "step-000000008"]
    assert ckpt.load_checkpoint(tmp_path, log=lambda _: None)["step"] == 6
    # reaching step 8 again sets the corrupt one aside instead of deleting it
    ckpt.save_checkpoint(tmp_path, 8, _state(8), keep=1)
    names = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert names == ["step-000000008", "superseded-step-000000008"]
    assert ckpt.load_checkpoint(tmp_path, log=lambda _: None)["step"] == 8


def test_keep_prunes_older_checkpoints(tmp_path):
    for step in (3, 6, 9, 12):
        ckpt.save_checkpoint(tmp_path, step, _state(step), keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert names == ["step-000000009", "step-000000012"]


def test_rng_state_is_tensors_and_primitives_and_restores_every_generator(tmp_path):
    random.seed(1)
    random.gauss(0, 1)  # python caches gauss_next
    np.random.seed(2)
    np.random.standard_normal()  # numpy caches a gaussian (has_gauss = 1)
    torch.manual_seed(3)
    ckpt.save_checkpoint(tmp_path, 1, {"rng": ckpt.rng_state()})
    want = (random.random(), random.gauss(0, 1), np.random.standard_normal(), np.random.rand(3),
            torch.rand(3))
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    ckpt.set_rng_state(ckpt.load_checkpoint(tmp_path)["rng"])  # weights_only=True
    got = (random.random(), random.gauss(0, 1), np.random.standard_normal(), np.random.rand(3),
           torch.rand(3))
    assert got[:3] == want[:3]
    assert np.array_equal(got[3], want[3]) and torch.equal(got[4], want[4])


@pytest.mark.parametrize("name", ["adamw", "sr-adamw", "muon", "scion"])
def test_every_optimizer_state_round_trips_through_a_weights_only_checkpoint(tmp_path, name):
    cfg = load_run_config(None, ["model.preset=cpu-50k", f"optim.name={name}"])
    x = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))

    def make():
        torch.manual_seed(0)
        model = build_model(cfg.model, 256)
        return model, build_optimizer(model, cfg.optim)

    def step(model, opt):
        opt.zero_grad()
        model(x).float().logsumexp(-1).mean().backward()
        opt.step()

    a, opt_a = make()
    step(a, opt_a)
    ckpt.save_checkpoint(tmp_path, 1, {"model": a.state_dict(), "optimizer": opt_a.state_dict()})
    state = ckpt.load_checkpoint(tmp_path, log=pytest.fail)
    b, opt_b = make()
    b.load_state_dict(state["model"])
    opt_b.load_state_dict(state["optimizer"])
    for model, opt in ((a, opt_a), (b, opt_b)):
        step(model, opt)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert [type(g["norm"]) for g in opt_b.param_groups if "norm" in g] == \
           [type(g["norm"]) for g in opt_a.param_groups if "norm" in g]  # Scion: LMOs, not dicts


def test_code_running_pickle_is_refused_and_never_runs(tmp_path):
    ckpt.save_checkpoint(tmp_path, 4, _state(4))
    marker = tmp_path / "code-ran"
    write_malicious_checkpoint(tmp_path, 8, marker)
    lines: list[str] = []
    assert ckpt.load_checkpoint(tmp_path, log=lines.append)["step"] == 4
    assert not marker.exists()
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("checkpoint step-000000008 is corrupt "
                               "(state.pt: pickle refused by weights_only=True: ")
    with pytest.raises(UserError) as err:
        ckpt.load_final(tmp_path)
    assert "\n" not in str(err.value) and str(_dir(tmp_path, 8)) in str(err.value)
    assert not marker.exists()
    # the file really is malicious: an unrestricted unpickler runs it
    torch.load(_dir(tmp_path, 8) / "state.pt", weights_only=False)
    assert marker.exists()


def test_load_final_takes_the_newest_only(tmp_path):
    for step in (4, 8):
        ckpt.save_checkpoint(tmp_path, step, _state(step))
    step, state = ckpt.load_final(tmp_path)
    assert step == 8 and state["step"] == 8
    _truncate(_dir(tmp_path, 8))
    with pytest.raises(UserError, match=r"000008: corrupt checkpoint \(state.pt: 1000 bytes"):
        ckpt.load_final(tmp_path)
    assert ckpt.load_final(tmp_path / "none") is None


def test_a_format_1_checkpoint_is_reported_not_loaded(tmp_path):
    """Before manifests: state.pt only, with a pickled numpy RNG tuple."""
    d = _dir(tmp_path, 3)
    d.mkdir(parents=True)
    torch.save({"step": 3, "rng": {"numpy": np.random.get_state()}}, d / "state.pt")
    lines: list[str] = []
    assert ckpt.load_checkpoint(tmp_path, log=lines.append) is None
    assert lines == [("checkpoint step-000000003 is corrupt (no manifest.json); "
                      "no intact checkpoint: starting from scratch")]


@pytest.mark.parametrize("doc,problem", [
    ("x", "manifest.json is not an object"),
    ({"format": 1, "step": 2, "files": {}}, "manifest.json has format 1, this scalelab reads 2"),
    ({"format": 2, "step": 2, "files": {}}, "manifest.json lists no files"),
    ({"format": 2, "step": 2, "files": {"../x": {"size": 1, "sha256": "a"}}},
     "manifest.json has a malformed entry '../x'"),
    ({"format": 2, "step": 2, "files": {"a": {"size": "1", "sha256": "a"}}},
     "manifest.json has a malformed entry 'a'"),
])
def test_check_manifest_refuses_malformed_documents(doc, problem):
    assert check_manifest(doc, 2, lambda n: 1, lambda n: "a") == problem


def test_check_manifest_hashes_only_when_every_size_matches():
    doc = manifest_doc(2, {"a": FileDigest(3, "h"), "b": FileDigest(4, "h")})
    hashed: list[str] = []

    def digest(name):
        hashed.append(name)
        return "h"

    assert check_manifest(doc, 2, {"a": 3, "b": 5}.get, digest) == "b: 5 bytes, manifest says 4"
    assert hashed == []
    assert check_manifest(doc, 2, {"a": 3}.get, digest) == "b missing"
    assert check_manifest(doc, 2, {"a": 3, "b": 4}.get, digest) is None
    assert hashed == ["a", "b"]
