"""Choose the next runs: the actions that most shrink the target's expected CI width per FLOP.

The target (targets.py) is one recipe's E by default; a ranking or a multiplier has
one or more recipes, each a slice of the candidate space with its own size points,
planning posterior and actions below (an action belongs to one recipe, its ``recipe``), and
the gain of an action is the drop of the target's width when that recipe's Var E and
degrees of freedom change as described here.

Candidates are grouped into *actions*, the smallest sets of runs that change the target
(target_fits.py: only settled sizes enter the fit):

- settle N: the coordinate-search runs still missing at N (Kim et al. 2025, arXiv
  2509.14786; the rule of ``scalelab.tune.coordinate``): for a size with runs, the
  untried in-grid neighbours of its best cell; for a size without runs, a start cell and
  its neighbours; for a size whose neighbours are all run but whose best cell has fewer
  seeds than the most replicated cell there, that cell's missing seeds (target_fits.py: a
  mean of one run must not beat a mean of several). The start cell is transferred from the sizes already settled: per
  axis, the best cell's grid index regressed linearly on log N and rounded (one settled size:
  its cell; none: the sizes with runs; no runs: ``Axis.start``), since the optimum of the
  tuned axes drifts with N. Its effect: a point at N with the best cell's weight.
- replicate N: one more seed of a settled size's best cell (the next replicate index not
  run). Its effect: weight + 1 at N (the reported interval's degrees of freedom are the
  sizes', n - 3: a replicate narrows it through the weight alone). Offered only once
  ``law.MIN_SIZES`` sizes are settled (the target has an interval): before, a replicate's value would
  be judged against the prior alone, and the cheapest sizes' seeds would win on price
  (with replicates offered from the start, an earlier version of the synthetic study
  needed a median 62 runs for a 0.2-wide interval, 50 without).

Score of an action a (posterior.py): gain(a) = width(design) - width(design + a), the
expected reduction of E's CI width, per FLOP: score = gain / cost(a), cost = the FLOPs of
its runs. The batch of K runs is chosen greedily: take the best-scoring action that fits
the remaining budget, add its effect to the design, rescore, repeat. The information a run
adds does not depend on its outcome, so the greedy batch needs no simulated outcomes
(sequential c-optimal design; Atkinson, Donev & Tobias 2007). An action larger than the
room left in the batch contributes its first runs (centre first); the rest stay pending.
``studentized=False`` judges 2 z sqrt(Var E) instead of the reported 2 t sqrt(Var E): the
plain c-criterion. On the synthetic study of docs/adaptive.md (12 seeds, width 0.1) it
reached the target with 0.57 of the grid's runs and 0.50 of its FLOPs (studentized: 0.59,
0.51), and its intervals at the stop covered E in 11/12 seeds, as the studentized ones did.
(With intervals allowed on 4 sizes it covered E in 9/12 only: without t it stopped on fewer
degrees of freedom, when the noise estimate happened to be low.) The default stays the
reported width, which counts the degrees of freedom.

Approximations, said plainly: a settle action is costed at the runs known to be missing
now; when a neighbour beats the centre the walk moves and needs more (the next round
plans them). The law's Jacobian is taken at the planning point theta_p (a locally
optimal design); tuning runs off the optimum carry no information about E under this
model, which is why they are only bought as part of settling a size.

Every pending candidate is listed in the round's table (``Plan.table``), with the action
it belongs to (null: none, e.g. a cell far from any optimum; gain and score 0) and that
action's gain (nats of CI width) and score (gain per FLOP) on the design before the batch
(a later replicate, first offered once the one before it was chosen, carries its score
at that step of the greedy batch); the chosen ones carry their rank (launch order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.adaptive.posterior import Design, Posterior, planning_posterior
from analysis.adaptive.space import CandidateSpace, Cell
from analysis.adaptive.target_fits import SizePoints, size_points
from analysis.adaptive.targets import Asymptote, Estimate, Target
from analysis.errors import AnalysisInputError
from analysis.fit.identified import MIN_SIZES
from analysis.fit.power_law import SCALE

__all__ = ["GRID", "Action", "Plan", "actions", "plan_next", "start_cell"]

GRID = "grid"
"""The recipe name of the whole candidate space (the default target: its E)."""


@dataclass(frozen=True)
class Action:
    """A set of runs that changes the target: its runs (keys, launch order), the weight it
    adds at N, and its cost in FLOPs."""

    kind: str  # "settle" | "replicate"
    N: float
    cell: Cell
    """The best (or start) cell the action is about."""
    keys: tuple[str, ...]
    weight: float
    cost: float
    recipe: str = ""
    """The recipe (targets.py) whose fit the action changes."""


@dataclass(frozen=True)
class Plan:
    """A round's decision: every pending candidate with its score, and the chosen runs."""

    table: pl.DataFrame
    """Pending runs: key, N, axes, replicate, flops, recipe, action, action_cost, gain,
    score, selected, rank."""
    chosen: pl.DataFrame
    """The selected rows of ``table``, in rank order."""
    posterior: Posterior
    """The planning posterior of the target's first recipe."""
    width: float
    """The planning model's width of the target's CI now (before the batch)."""


def start_cell(space: CandidateSpace, points: SizePoints, N: float) -> Cell:
    """The transferred start cell at a size without runs (module docstring)."""
    ref = points.settled if points.settled.height else points.frame
    if ref.height == 0:
        return tuple(a.start_index for a in space.axes)
    cells = np.array([space.cell_of(r) for r in ref.iter_rows(named=True)])  # (n, d)
    logn = np.log(ref["N"].to_numpy())
    if ref.height == 1:
        return tuple(int(i) for i in cells[0])
    out = []
    for k, n in enumerate(space.shape):
        slope, icpt = np.polyfit(logn, cells[:, k].astype(float), 1)
        out.append(int(np.clip(np.rint(icpt + slope * np.log(N)), 0, n - 1)))
    return tuple(out)


def actions(space: CandidateSpace, points: SizePoints, done_keys: set[str],
            cost: Callable[[list[str]], float]) -> list[Action]:
    """Every settle and replicate action available now (module docstring)."""
    out = []
    by_n = {r["N"]: r for r in points.frame.iter_rows(named=True)}
    identified = points.settled.height >= MIN_SIZES
    for N in space.sizes:
        row = by_n.get(N)
        if row is None:
            c0 = start_cell(space, points, N)
            keys = [space.key(N, c) for c in [c0, *space.neighbours(c0)]]
            out.append(Action("settle", N, c0, tuple(keys), 1.0, cost(keys)))
            continue
        best = space.cell_of(row)
        if not row["settled"]:
            keys = [space.key(N, c) for c in space.neighbours(best)]
            keys = [k for k in keys if k not in done_keys]
            if not keys and row["behind"] > 0:  # level the best cell's seeds (target_fits.py)
                keys = [k for k in (space.key(N, best, r) for r in range(space.replicates))
                        if k not in done_keys][:row["behind"]]
            if not keys:  # one more seed of each rival (target_fits.py)
                keys = [a.keys[0] for c in points.rivals.get(N, ())
                        if (a := _next_replicate(space, N, c, done_keys, cost)) is not None]
            if keys:
                out.append(Action("settle", N, best, tuple(keys), float(row["m"]), cost(keys)))
            continue
        nxt = _next_replicate(space, N, best, done_keys, cost)
        if nxt is not None and identified:
            out.append(nxt)
    return out


@dataclass
class _Recipe:
    """One recipe's planning state: its slice, posterior and current design."""

    space: CandidateSpace
    posterior: Posterior
    design: Design
    V: np.ndarray  # (3, 3), the posterior covariance of ``design``

    def estimate(self) -> Estimate:
        return Estimate(self.posterior.theta[2], float(self.V[2, 2]), float(self.design.dof))

    def add(self, a: Action) -> None:
        self.design = self.design.add(a.N / SCALE, a.weight)
        self.V = self.posterior.cov(self.design)


def _gains(target: Target, states: dict[str, _Recipe], acts: list[Action],
           studentized: bool) -> tuple[np.ndarray, float]:
    """Expected drop of the target's CI width for each action (k,), and the width now."""
    est = {r: st.estimate() for r, st in states.items()}
    objective = target.objective(est, studentized)
    now = float(objective(est))
    out = np.zeros(len(acts))
    for r, st in states.items():
        idx = [i for i, a in enumerate(acts) if a.recipe == r]
        if not idx:
            continue
        x = np.array([acts[i].N / SCALE for i in idx])
        w = np.array([acts[i].weight for i in idx])
        var = st.posterior.var_after(st.V, x, w)
        for i, xi, wi, v in zip(idx, x, w, var):
            dof = st.design.add(xi, wi).dof
            out[i] = now - objective({**est, r: Estimate(est[r].E, float(v), float(dof))})
    return np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0), now


def plan_next(space: CandidateSpace, done: pl.DataFrame, pending: pl.DataFrame, *,
              batch: int = 4, budget_left: float = np.inf, noise_sd: float = 0.02,
              level: float = 0.95, studentized: bool = True,
              target: Target | None = None) -> Plan:
    """Score every pending candidate and choose up to ``batch`` runs within
    ``budget_left`` FLOPs (module docstring). ``done``: finished runs (run frame with
    ``loss``); ``pending``: the candidates not yet run (run frame with ``flops``);
    ``target``: what to pin down (targets.py; default: E of the whole grid)."""
    target = target if target is not None else Asymptote(GRID, space, level)
    done_keys = set(done["key"].to_list())
    if overlap := done_keys & set(pending["key"].to_list()):
        raise AnalysisInputError(f"pending candidates already done: {sorted(overlap)[:3]}")
    flops = dict(zip(pending["key"].to_list(), pending["flops"].to_list()))

    def cost(keys: list[str]) -> float:
        return float(sum(flops.get(k, np.inf) for k in keys))

    states: dict[str, _Recipe] = {}
    acts: list[Action] = []
    for name, sub in target.recipes.items():
        points = size_points(sub.runs_in(done), sub)
        post = planning_posterior(points, noise_sd=noise_sd, level=level, studentized=studentized)
        s = points.settled
        design = Design(s["N"].to_numpy() / SCALE, s["m"].to_numpy().astype(float))
        states[name] = _Recipe(sub, post, design, post.cov(design))
        mine = [dataclasses.replace(a, recipe=name)
                for a in actions(sub, points, done_keys, cost) if np.isfinite(a.cost)]
        acts += mine

    def follow(a: Action, taken: set[str]) -> Action | None:  # the cell's next seed
        nxt = _next_replicate(states[a.recipe].space, a.N, a.cell, done_keys | taken, cost)
        return None if nxt is None else dataclasses.replace(nxt, recipe=a.recipe)

    return greedy_plan(target, states, acts, pending, cost, follow, batch=batch,
                       budget_left=budget_left, studentized=studentized)


def greedy_plan(target: Target, states: dict[str, _Recipe], acts: list[Action],
                pending: pl.DataFrame, cost: Callable[[list[str]], float],
                follow: Callable[[Action, set[str]], Action | None], *, batch: int,
                budget_left: float, studentized: bool) -> Plan:
    """The batch: every action scored on the current design, then greedily the best gain per
    unit cost, each choice added to its recipe's design before the next is scored (a chosen
    replicate makes way for ``follow(action, chosen keys)``, the same cell's next seed).
    The one selection engine of ``plan_next`` and ``recipe_design.plan_recipes``."""
    gain0, width_now = _gains(target, states, acts, studentized)
    info: dict[str, tuple] = {}  # first pass: every action on the current design
    for a, g in zip(acts, gain0):
        for k in a.keys:
            info.setdefault(k, (a.recipe, a.kind, a.cost, float(g), float(g) / a.cost))
    chosen: list[str] = []
    left = float(budget_left)
    avail = list(acts)
    while len(chosen) < batch and avail:
        gains, _ = _gains(target, states, avail, studentized)
        room = batch - len(chosen)
        new_keys = [[k for k in a.keys if k not in chosen][:room] for a in avail]
        costs = np.array([cost(keys) for keys in new_keys])
        ok = (gains > 0) & (costs <= left) & np.array([bool(k) for k in new_keys])
        if not ok.any():
            break
        i = int(np.argmax(np.where(ok, gains / np.maximum(costs, 1e-300), -np.inf)))
        a = avail.pop(i)
        keys = new_keys[i]
        for k in keys:  # a run first scored here (a later replicate): its greedy score
            info.setdefault(k, (a.recipe, a.kind, a.cost, float(gains[i]), float(gains[i] / costs[i])))
        chosen += keys
        left -= costs[i]
        states[a.recipe].add(a)
        if a.kind == "replicate" and (nxt := follow(a, set(chosen))) is not None:
            avail.append(nxt)
    keys = pending["key"].to_list()
    none = (None, None, None, 0.0, 0.0)
    rank = {k: i for i, k in enumerate(chosen)}
    table = pending.with_columns(
        pl.Series("recipe", [info.get(k, none)[0] for k in keys], dtype=pl.String),
        pl.Series("action", [info.get(k, none)[1] for k in keys], dtype=pl.String),
        pl.Series("action_cost", [info.get(k, none)[2] for k in keys], dtype=pl.Float64),
        pl.Series("gain", [info.get(k, none)[3] for k in keys], dtype=pl.Float64),
        pl.Series("score", [info.get(k, none)[4] for k in keys], dtype=pl.Float64),
        pl.Series("selected", [k in rank for k in keys], dtype=pl.Boolean),
        pl.Series("rank", [rank.get(k) for k in keys], dtype=pl.Int64),
    )
    first = next(iter(states.values())).posterior
    return Plan(table, table.filter(pl.col("selected")).sort("rank"), first, width_now)


def _next_replicate(space: CandidateSpace, N: float, cell: Cell, taken: set[str],
                    cost: Callable[[list[str]], float]) -> Action | None:
    """One more seed of ``cell`` at N: the first replicate index not in ``taken`` (None:
    replicates exhausted)."""
    for r in range(space.replicates):
        key = space.key(N, cell, r)
        if key not in taken:
            return Action("replicate", N, cell, (key,), 1.0, cost([key]))
    return None
