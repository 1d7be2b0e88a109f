"""``analysis.tables.bounded_read``: the one reader of run and sweep files never blocks,
never reads past its kind's limit, refuses what is no regular file, and reads the file it
checked (a file renamed over the path afterwards is not what it reads)."""

from __future__ import annotations

import os

import polars as pl
import pytest

from analysis.tables.bounded_read import (
    LIMITS,
    Unreadable,
    kind_of,
    limit_for,
    read_bounded,
)
from analysis.tables.safe_parquet import CorruptParquetError, quick_problem, read_parquet_checked


def test_kinds_and_limits_by_name(tmp_path):
    assert [kind_of(p) for p in ("r/status.json", "r/claim.json", "r/meta.json", "r/manifest.json",
                                 "r/config.yaml", "s/spec.yaml", "s/plan.parquet", "s/runs.parquet",
                                 "s/ensembles/evals.parquet", "r/evals.parquet", "r/evals/part-000000010.parquet",
                                 "r/checkpoint/step-000000008/state.pt",
                                 "r/checkpoint/step-000000008/manifest.json", "s/plan.parquet.manifest.json")] == [
        "state", "state", "json", "json", "yaml", "yaml", "table", "table", "table", "records", "records",
        "checkpoint", "json", "state"]
    assert limit_for("r/status.json") == 1 << 20 and limit_for("r/evals.parquet") == 2 << 30
    assert LIMITS["yaml"] == 64 << 20


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    path = tmp_path / "evals.parquet"
    os.mkfifo(path)
    with pytest.raises(Unreadable, match="a FIFO"):
        read_bounded(path)
    assert quick_problem(str(path)) == "a FIFO"
    with pytest.raises(CorruptParquetError, match="a FIFO"):
        read_parquet_checked(path)


def test_a_device_and_a_directory_are_refused(tmp_path):
    (tmp_path / "meta.json").symlink_to("/dev/zero")
    with pytest.raises(Unreadable, match="a device"):
        read_bounded(tmp_path / "meta.json")
    (tmp_path / "config.yaml").mkdir()
    with pytest.raises(Unreadable, match="a directory"):
        read_bounded(tmp_path / "config.yaml")


def test_a_sparse_giant_is_refused_by_its_size_without_reading_it(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_bytes(b"{}")
    os.truncate(path, 3 << 30)
    with pytest.raises(Unreadable, match=r"3 GiB, over the 16 MiB limit"):
        read_bounded(path)
    (tmp_path / "small.json").write_bytes(b"x" * 9)
    with pytest.raises(Unreadable, match="over the 8 bytes limit"):
        read_bounded(tmp_path / "small.json", 8)
    assert read_bounded(tmp_path / "small.json", 9).data == b"x" * 9


def test_it_reads_the_file_it_checked_not_one_renamed_over_the_path(tmp_path, monkeypatch):
    """Another file renamed over the path right after the check: pyarrow decodes the
    descriptor that was checked, the original rows."""
    import analysis.tables.safe_parquet as safe_parquet

    path, other = tmp_path / "evals.parquet", tmp_path / "other.parquet"
    pl.DataFrame({"loss": [1.0, 2.0]}).write_parquet(path)
    pl.DataFrame({"loss": [9.0]}).write_parquet(other)
    real = safe_parquet.open_checked

    def then_swap(where, limit=None):
        found = real(where, limit)
        os.replace(other, path)
        return found

    monkeypatch.setattr(safe_parquet, "open_checked", then_swap)
    assert read_parquet_checked(path)["loss"].to_list() == [1.0, 2.0]
    monkeypatch.setattr(safe_parquet, "open_checked", real)
    assert read_parquet_checked(path)["loss"].to_list() == [9.0]
