"""``ensembles/evals.parquet`` proves its integrity like the sweep's other files
(``analysis.tables.sweep_manifest``): ``scalelab ensemble`` writes it with a manifest, every
reader (``fit --x K``, ``compare``, ``report``) refuses a flipped bit in one line naming
``scalelab ensemble SWEEP``, and that command moves the damaged file aside and evaluates
every group afresh. Before, a bit flipped in a loss value read back as another loss, and
the ensemble verdicts with it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import polars as pl
import pytest
from test_bounded_work import ensemble_sweep

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from _fuzz import run_cli  # noqa: E402

from scalelab.errors import UserError  # noqa: E402


def _flip_a_loss(path: Path) -> None:
    """Flip one mantissa bit of the first loss value: the parquet still decodes."""
    frame = pl.read_parquet(path)
    target = frame["loss"][0]
    data = bytearray(path.read_bytes())
    import struct

    at = bytes(data).find(struct.pack("<d", target))
    assert at > 0
    data[at] ^= 1  # the lowest mantissa bit
    path.write_bytes(bytes(data))
    assert pl.read_parquet(path)["loss"][0] != target  # silently another number without a manifest


def test_ensemble_losses_carry_a_manifest_and_a_flipped_bit_is_refused(tmp_path):
    from scalelab.ensemble.evaluate import DAMAGED_SUFFIX, set_aside_damaged
    from scalelab.store.sweep_files import read_sweep_file

    sweep = ensemble_sweep(tmp_path)
    done = run_cli(["ensemble", str(sweep), "--device", "cpu"])
    assert done.code == 0, done.describe([])
    out = sweep / "ensembles" / "evals.parquet"
    data = out.read_bytes()
    doc = json.loads((sweep / "ensembles" / "evals.parquet.manifest.json").read_text())
    assert doc == {"format": 1, "file": "evals.parquet", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    before = read_sweep_file(out)

    _flip_a_loss(out)
    with pytest.raises(UserError, match=r"evals\.parquet.*manifest.*scalelab ensemble SWEEP"):
        read_sweep_file(out)
    refused = run_cli(["fit", str(sweep), "--x", "K"])
    assert refused.code == 2 and not refused.escaped, refused.describe([])
    line, = refused.stderr.strip().splitlines()
    assert "evals.parquet" in line and "scalelab ensemble SWEEP" in line

    again = run_cli(["ensemble", str(sweep), "--device", "cpu"])
    assert again.code == 0, again.describe([])
    assert f"moved aside as evals.parquet{DAMAGED_SUFFIX}" in again.stderr
    assert (sweep / "ensembles" / f"evals.parquet{DAMAGED_SUFFIX}").is_file()
    assert read_sweep_file(out).equals(before)  # evaluated afresh: the same losses, bit for bit
    assert set_aside_damaged(sweep) is None  # a sound file stays where it is
