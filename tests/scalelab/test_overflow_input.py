"""Numbers too large (or negative) for the machine types underneath: one line and exit 2
through the real CLI, never an OverflowError traceback. ``--where`` arguments that polars
takes as unsigned or 64-bit integers, and integer constants in derive rules and config
values past float64 or 64 bits."""

from __future__ import annotations

import pytest
from test_bad_input import assert_one_line, cli, write

from analysis.synthetic.runs import synthetic_runs

BIG40 = "1" + "0" * 39
BIG400 = "1" + "0" * 400


@pytest.fixture()
def sweep(tmp_path):
    d = tmp_path / "sweep"
    d.mkdir()
    synthetic_runs().write_parquet(d / "runs.parquet")
    return d


@pytest.mark.parametrize(("where", "needle"), [
    ("pl.col('final_loss').round(-1) < 10", "too small"),
    ("pl.col('final_loss').fill_null(strategy='forward', limit=-1) < 10", "too small"),
    (f"pl.col('N') > {BIG40}", "integer 100000000000... (40 digits) does not fit in 64 bits"),
    (f"pl.col('N').is_in([{BIG40}])", "(40 digits) does not fit in 64 bits"),
], ids=["round-1", "limit-1", "int40", "is_in-int40"])
def test_where_overflows_are_one_line(tmp_path, sweep, where, needle):
    proc, _ = cli(tmp_path, "fit", sweep, "--bootstrap", "0", "--where", where)
    assert_one_line(proc, str(sweep), f"where {where!r}", needle)


def test_a_400_digit_integer_in_a_derive_rule_is_one_line(tmp_path):
    spec = write(tmp_path / "s.yaml", "name: t\nbase:\n  data: {vocab_size: 256, "
                 f"unique_tokens: 4096}}\nderive:\n  optim.lr: \"{BIG400} * 1e-3\"\n")
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, f"{spec}:5: derive.optim.lr: rule",
                    "a 401-digit integer is too large for a float64")


@pytest.mark.parametrize(("where", "text"), [
    ("derive", 'derive:\n  model.d_model: "1e300"\n'),
    ("base", f"  model: {{d_model: {BIG400}}}\n"),
])
def test_integers_past_64_bits_are_refused_where_written(tmp_path, where, text):
    base = "name: t\nbase:\n  data: {vocab_size: 256, unique_tokens: 4096}\n"
    spec = write(tmp_path / "s.yaml", base + text)
    proc, _ = cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, f"{spec}:", f"{where}.model.d_model:", "-digit integer is out of range: "
                    "expected >= 1 and within 64 bits")
