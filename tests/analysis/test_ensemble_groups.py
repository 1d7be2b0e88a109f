"""analysis.tables.ensemble_groups: one ensemble group per size, the current spec's and the best."""

from __future__ import annotations

import polars as pl

from analysis.tables.ensemble_groups import pick_groups


def _group(gid: str, n: int, members: list[str], k_losses: list[float]) -> list[dict]:
    ids = ",".join(members)
    rows = [dict(run_id=gid, N=n, members=k, method="logits", member=None, loss=v,
                 member_run_ids=ids) for k, v in enumerate(k_losses, start=1)]
    rows += [dict(run_id=gid, N=n, members=1, method="member", member=m,
                  loss=k_losses[0] + 0.01 * m, member_run_ids=ids) for m in range(len(members))]
    return rows


def _evals() -> pl.DataFrame:
    return pl.DataFrame(
        _group("g_small", 1000, ["a0", "a1", "a2"], [2.5, 2.4, 2.35])
        + _group("g_reg", 2000, ["b0", "b1", "b2"], [2.3, 2.25, 2.22])  # the regularized cell
        + _group("g_low_wd", 2000, ["c0", "c1", "c2"], [2.32, 2.2, 2.15])  # better at K = 3
        + _group("g_old", 3000, ["d0", "old1", "old2"], [2.1, 2.0, 1.9]))  # an older spec's runs


def test_one_group_per_size_from_the_current_runs():
    notes: list[str] = []
    runs = pl.Series(["a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2", "d0"])
    picked = pick_groups(_evals(), runs, notes)
    assert sorted(picked["run_id"].unique().to_list()) == ["g_low_wd", "g_small"]
    assert any("1 ensemble group(s) with runs outside" in n for n in notes)
    assert any("1 more ensemble group(s) at a size that has a better one" in n for n in notes)


def test_more_members_win_over_a_lower_loss_at_fewer():
    evals = pl.DataFrame(_group("three", 2000, ["x0", "x1", "x2"], [2.3, 2.2, 2.1])
                         + _group("two", 2000, ["y0", "y1"], [2.0, 1.9]))
    picked = pick_groups(evals, None, [])
    assert picked["run_id"].unique().to_list() == ["three"]


def test_a_table_without_group_ids_is_kept_whole():
    evals = _evals().drop("run_id")
    assert pick_groups(evals, None, []).equals(evals)
