"""--where parsing (analysis.tables.select), grouping, the x variables, the refuse-underdetermined
rule of fit_law, and parameters at their box bound (analysis.fit.diagnostics.at_bounds)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analysis import AnalysisInputError, PowerLaw, TooFewPointsError, fit_law
from analysis.fit.diagnostics import at_bounds, bound_side
from analysis.fit.grouped import group_label, group_runs
from analysis.fit.xvars import law_fitter, with_x_columns
from analysis.tables.select import parse_where, select_runs

RUNS = pl.DataFrame(
    {
        "run_id": ["a", "b", "c", "d", "e"],
        "recipe": ["standard", "standard", "regularized", "regularized", None],
        "optim.weight_decay": [0.1, 0.1, 1.0, 1.0, None],
        "N": [1000, 2000, 1000, 2000, 4000],
        "epochs": [1.0, 2.0, 1.0, 4.0, 1.0],
        "member": [0, 0, 0, 1, 2],
        "done": [True, True, False, True, True],
    }
)


def ids(*where: str) -> list[str]:
    return select_runs(RUNS, where)["run_id"].to_list()


@pytest.mark.parametrize(
    "where, expected",
    [
        ("recipe=standard", ["a", "b"]),
        ("recipe == 'standard'", ["a", "b"]),
        ('recipe="regularized"', ["c", "d"]),
        ("recipe!=standard", ["c", "d"]),  # a null recipe is neither
        ("recipe=null", ["e"]),
        ("recipe!=None", ["a", "b", "c", "d"]),
        ("optim.weight_decay=0.1", ["a", "b"]),
        ("optim.weight_decay>=1", ["c", "d"]),
        ("N<2e3", ["a", "c"]),
        ("N=1000", ["a", "c"]),
        ("epochs <= 1", ["a", "c", "e"]),
        ("done=false", ["c"]),
        ('pl.col("epochs") <= 1', ["a", "c", "e"]),
        ('pl.col("recipe").is_in(["regularized"])', ["c", "d"]),
        ('pl.col("N").is_between(1500, 4000, closed="left")', ["b", "d"]),
        ('(pl.col("N") > 1000) & ~(pl.col("member") > 0)', ["b"]),
        ('(pl.col("member") == 2) | (pl.col("recipe") == "standard")', ["a", "b", "e"]),
        ('pl.col("N") * pl.col("epochs") > 4000', ["d"]),
        ('pl.col("N") == pl.col("N").max()', ["e"]),
        ('pl.col("N") == "2000"', ["b", "d"]),  # constants typed by the column
        ('pl.col("recipe").str.starts_with("reg")', ["c", "d"]),
        ('pl.col("recipe").is_null()', ["e"]),
    ],
)
def test_where_selects(where, expected):
    assert ids(where) == expected


def test_conditions_are_anded():
    assert ids("recipe=standard", "N>1000") == ["b"]
    assert ids() == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    "where, message",
    [
        ("recpie=standard", "unknown column 'recpie' (did you mean 'recipe'?)"),
        ('pl.col("recpie") == 1', "did you mean 'recipe'"),
        ("N=abc", "column 'N' is Int64; 'abc' is not a number"),
        ("done=maybe", "use true or false"),
        ("N=", "no value after 'N='"),
        ("N<null", "'< null' is not a condition"),
        ("", "empty condition"),
        ('pl.col("N")', "not true/false"),
        ('pl.col("N") > 1 and pl.col("N") < 3', "use & and |"),
        ('1 < pl.col("N") < 3', "chained comparisons"),
        ('not pl.col("done")', "use ~"),
        ("N >", "no value after 'N>'"),
        ("pl.col(", "neither KEY=VALUE nor a polars expression"),
        ('pl.col("recipe").str.contains(".*", literal=False) & pl.col("N")', "recipe"),
    ],
)
def test_bad_conditions_are_one_line(where, message):
    with pytest.raises(AnalysisInputError) as err:
        select_runs(RUNS, [where])
    text = str(err.value)
    assert message in text and "\n" not in text


@pytest.mark.parametrize(
    "where",
    [
        "__import__('os')",
        "__import__('os').system('touch /tmp/pwned-by-where')",
        "open('/etc/passwd')",
        "exec('1')",
        "eval('1')",
        "getattr(pl, 'col')",
        "pl.read_csv('/etc/passwd')",
        'pl.col("N").__class__',
        'pl.col("N").__class__.__init__.__globals__',
        'pl.col("N").map_elements(print) > 0',
        'pl.col("N").pipe(print) > 0',
        "pl.col.__globals__",
        "(lambda: 1)()",
        "[c for c in ()]",
        "{'a': 1}",
        "10 ** 10 ** 10",
        'pl.col("N") > 10 ** 10 ** 10',
        "'a' * 999999999",
        "x.col('N') > 1",
        "pl.col(pl.col('N')) > 1",
        "~" * 1900 + 'pl.col("done")',
        "N=" + "9" * 3000,
    ],
)
def test_malicious_input_is_refused_with_one_line(where):
    with pytest.raises(AnalysisInputError) as err:
        parse_where(where, RUNS.schema)
    assert "\n" not in str(err.value)


def test_parse_where_returns_an_expression():
    expr = parse_where("recipe=standard", RUNS.schema)
    assert isinstance(expr, pl.Expr)
    assert RUNS.filter(expr).height == 2


def test_x_columns_are_added_for_where_and_group_by():
    runs = pl.DataFrame({"N": [1, 2], "D_total": [10, 20], "D_unique": [5, 5], "flops": [6.0, 7.0]})
    wide = with_x_columns(runs)
    assert wide["D"].to_list() == [10, 20] and wide["U"].to_list() == [5, 5]
    assert wide["C"].to_list() == [6.0, 7.0]
    assert select_runs(wide, ["D>10"]).height == 1


def test_group_runs_splits_sorts_and_names_nulls():
    groups = group_runs(RUNS, ["recipe"])
    assert [group_label(k) for k, _ in groups] == ["recipe=regularized", "recipe=standard", "recipe=None"]
    assert [g.height for _, g in groups] == [2, 2, 1]
    assert group_runs(RUNS, []) == [({}, RUNS)]
    assert group_label({"D": 2048.0, "recipe": "x"}) == "D=2048, recipe=x"
    with pytest.raises(AnalysisInputError, match="did you mean 'recipe'"):
        group_runs(RUNS, ["recipes"])


def test_law_fitter_validates_x():
    assert law_fitter("powerlaw", "C").x == "C"
    assert law_fitter("powerlaw").x == "N" and law_fitter("powerlaw").n_free == 3
    with pytest.raises(AnalysisInputError, match="--x must be one of"):
        law_fitter("powerlaw", "Q")
    with pytest.raises(AnalysisInputError, match="applies to powerlaw only; chinchilla reads N, D"):
        law_fitter("chinchilla", "D")
    with pytest.raises(AnalysisInputError, match="did you mean 'chinchilla'"):
        law_fitter("chinchila")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_fit_law_refuses_fewer_points_than_free_parameters_plus_one(n):
    data = pl.DataFrame({"N": [1e6, 2e6, 4e6][:n], "loss": [3.5, 3.3, 3.2][:n]})
    with pytest.raises(TooFewPointsError) as err:
        fit_law(PowerLaw(), data)
    assert str(err.value) == f"{n} points for 3 free parameters of powerlaw: need >= 4"
    assert isinstance(err.value, AnalysisInputError) and err.value.n == n


def test_fit_law_counts_free_parameters_only():
    data = pl.DataFrame({"N": [1e6, 2e6], "loss": [3.5, 3.3]})
    with pytest.raises(TooFewPointsError, match="2 points for 2 free parameters"):
        fit_law(PowerLaw(), data, fixed={"E": 3.0})
    # One free parameter needs 2 points by the free + 1 rule, but any fit needs 3.
    with pytest.raises(TooFewPointsError, match="2 points for 1 free parameters .*need >= 3"):
        fit_law(PowerLaw(), data, fixed={"E": 3.0, "alpha": 0.5})
    three = pl.DataFrame({"N": [1e6, 2e6, 4e6], "loss": [3.5, 3.3, 3.2]})
    assert fit_law(PowerLaw(), three, fixed={"E": 3.0, "alpha": 0.5}, warn=False).n_points == 3


def test_at_bounds_finds_a_parameter_the_box_set():
    N = np.array([1e6, 2e6, 4e6, 8e6, 1.6e7])
    data = pl.DataFrame({"N": N, "loss": 2.0 + 40.0 / N**0.3})
    free = fit_law(PowerLaw(), data, warn=False)
    assert at_bounds(free) == {}
    capped = fit_law(PowerLaw(), data, bounds={"alpha": (None, 0.1)}, warn=False)
    assert at_bounds(capped) == {"alpha": ("upper", pytest.approx(0.1))}
    law = PowerLaw()
    assert bound_side(law, "alpha", 10.0, 0.0, 10.0) == ("upper", 10.0)
    assert bound_side(law, "alpha", 9.99, 0.0, 10.0) == ("upper", 10.0)  # within 1e-3 relative
    assert bound_side(law, "alpha", 9.9, 0.0, 10.0) is None
    assert bound_side(law, "A", float(np.exp(-30.0)), -30.0, 60.0) == ("lower", pytest.approx(np.exp(-30)))
