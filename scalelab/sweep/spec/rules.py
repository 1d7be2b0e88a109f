"""Derive rules: a tiny, safe expression language for derived sweep values.

A spec's ``derive:`` section maps a dotted config key to a rule string, e.g.

    data.unique_tokens: "20 * N"                       # Chinchilla-style tokens per parameter
    optim.lr: "3e-3 * (256 / model.d_model)"           # lr from width (muP-style 1/width)

    launcher.gpus_per_node: "1 if N < 5e8 else 4"       # resources per model size

Grammar: numbers, ``+ - * / **``, unary ``-``/``+``, parentheses, the functions
``min max log sqrt exp floor ceil round ladder`` and names: ``N`` (total parameters),
``N_non_embedding``, or any numeric dotted config key (``model.d_model``,
``data.epochs``, ...); ``launcher.*`` rules read more (``scalelab.sweep.spec.launcher``).
``A if COND else B`` picks a value; COND is a comparison (``< <= > >= == !=``, chained
as in Python) or several joined by ``and``/``or``/``not``, and comparisons are allowed
nowhere else. ``ladder(x, r1, r2, ...)`` is the first rung >= x (rungs increasing), else
the last one: it rounds up to a few levels, e.g. time limits that keep runs in few job
arrays. Rules are parsed with ``ast`` and evaluated by walking the tree;
nothing is ever passed to ``eval``. Arithmetic is in float64 (so ``10**10**10``
overflows instead of hanging); integer targets are rounded to the nearest integer by
the planner. Parse errors, unknown names (with did-you-mean), an integer constant too
large for a float64, division by zero and domain errors are one-line ``UserError``s
naming the rule.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scalelab import strict
from scalelab.errors import UserError, did_you_mean

__all__ = ["FUNCTIONS", "SPECIAL_NAMES", "Rule", "order_rules", "parse_rule"]

SPECIAL_NAMES = ("N", "N_non_embedding")
"""Names that are not config keys: total and non-embedding parameter counts."""

FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "log": math.log,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "floor": lambda x: float(math.floor(x)),
    "ceil": lambda x: float(math.ceil(x)),
    "round": lambda x: float(round(x)),
    "ladder": lambda x, *rungs: _ladder(x, rungs),
}
_ARITY = {"min": None, "max": None, "log": 1, "sqrt": 1, "exp": 1, "floor": 1, "ceil": 1, "round": 1,
          "ladder": None}

_BINOPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNOPS: dict[type, Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_COMPARE: dict[type, Callable[[float, float], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _ladder(x: float, rungs: tuple[float, ...]) -> float:
    if any(a >= b for a, b in itertools.pairwise(rungs)):
        raise ValueError("ladder() rungs must increase")
    return next((r for r in rungs if r >= x), rungs[-1])


@dataclass(frozen=True)
class Rule:
    """One parsed rule ``target: text``; ``names`` are the names it reads."""

    target: str
    text: str
    names: frozenset[str]
    _fn: Callable[[Mapping[str, float]], float] = field(repr=False, compare=False)

    def evaluate(self, env: Mapping[str, float]) -> float:
        """Evaluate with ``env`` (name -> number); errors are UserErrors naming the rule."""
        try:
            value = self._fn(env)
        except ZeroDivisionError:
            raise self._error("division by zero") from None
        except OverflowError:
            raise self._error("numeric overflow") from None
        except (ValueError, TypeError) as err:  # math domain errors, complex results
            raise self._error(f"math error ({err})") from None
        if isinstance(value, complex) or not math.isfinite(value):
            raise self._error(f"result is not a finite real number ({value})")
        return float(value)

    def _error(self, message: str) -> UserError:
        return UserError(f"rule {self.text!r}: {message}", key=f"derive.{self.target}")


def parse_rule(target: str, text: str, known: Iterable[str]) -> Rule:
    """Parse and check ``text``; ``known`` are the dotted keys a rule may read."""
    key = f"derive.{target}"
    if not isinstance(text, str) or not text.strip():
        raise UserError("expected a rule string such as '20 * N'", key=key)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        col = f" at column {err.offset}" if err.offset else ""
        raise UserError(f"rule {text!r}: syntax error{col}", key=key) from None
    except (ValueError, RecursionError, MemoryError):
        raise UserError(f"rule {text!r}: cannot parse", key=key) from None
    known = set(known)
    names: set[str] = set()
    try:
        fn = _compile(tree.body, text, key, known, names)
    except RecursionError:
        raise UserError(f"rule {text!r}: nested too deeply", key=key) from None
    return Rule(target=target, text=text, names=frozenset(names), _fn=fn)


def order_rules(rules: Mapping[str, Rule]) -> list[Rule]:
    """Rules sorted so each runs after the rules whose targets it reads (a rule reading N
    after every rule that sets a model.* key or data.vocab_size); cycles are errors."""
    done: dict[str, Rule] = {}
    visiting: list[str] = []

    def visit(target: str) -> None:
        if target in done:
            return
        if target in visiting:
            cycle = " -> ".join(visiting[visiting.index(target) :] + [target])
            raise UserError(f"rules form a cycle ({cycle})", key=f"derive.{target}")
        visiting.append(target)
        for name in sorted(_inputs(rules[target], rules)):
            visit(name)
        visiting.pop()
        done[target] = rules[target]

    for target in rules:
        visit(target)
    return list(done.values())


def _inputs(rule: Rule, rules: Mapping[str, Rule]) -> set[str]:
    """Targets of other rules that ``rule`` reads; N and N_non_embedding read every rule
    that sets the model shape or the vocabulary."""
    out = {n for n in rule.names if n in rules}
    if rule.names & set(SPECIAL_NAMES):
        out |= {t for t in rules if (t.startswith("model.") or t == "data.vocab_size")
                and t != rule.target}
    return out


def _compile(node: ast.AST, text: str, key: str, known: set[str], names: set[str]):
    def bad(what: str) -> UserError:
        return UserError(f"rule {text!r}: {what} is not allowed", key=key)

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise bad(f"constant {node.value!r}")
        try:
            value = float(node.value)
        except OverflowError:  # an integer past float64's ~1.8e308
            raise UserError(f"rule {text!r}: {strict.shown(node.value)} is too large for a "
                            "float64 (at most about 1.8e308)", key=key) from None
        return lambda env: value
    if isinstance(node, ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise bad(f"operator {type(node.op).__name__}")
        left = _compile(node.left, text, key, known, names)
        right = _compile(node.right, text, key, known, names)
        return lambda env: op(left(env), right(env))
    if isinstance(node, ast.UnaryOp):
        op1 = _UNOPS.get(type(node.op))
        if op1 is None:
            raise bad(f"operator {type(node.op).__name__}")
        operand = _compile(node.operand, text, key, known, names)
        return lambda env: op1(operand(env))
    if isinstance(node, ast.IfExp):
        test = _condition(node.test, text, key, known, names)
        body = _compile(node.body, text, key, known, names)
        orelse = _compile(node.orelse, text, key, known, names)
        return lambda env: body(env) if test(env) else orelse(env)
    if isinstance(node, (ast.Compare, ast.BoolOp)):
        raise UserError(f"rule {text!r}: a comparison is only allowed as the condition of "
                        "'A if COND else B'", key=key)
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = _dotted(node)
        if name is None:
            raise bad("this expression")
        if name not in known and name not in SPECIAL_NAMES:
            hint = did_you_mean(name, [*SPECIAL_NAMES, *known])
            raise UserError(f"rule {text!r}: unknown name '{name}'{hint}", key=key)
        names.add(name)
        return lambda env: env[name]
    if isinstance(node, ast.Call):
        fname = node.func.id if isinstance(node.func, ast.Name) else None
        if fname not in FUNCTIONS:
            shown = fname or "this call"
            raise UserError(
                f"rule {text!r}: unknown function '{shown}'{did_you_mean(shown, FUNCTIONS)}"
                f" (allowed: {', '.join(FUNCTIONS)})",
                key=key,
            )
        if node.keywords:
            raise bad("a keyword argument")
        arity = _ARITY[fname]
        if len(node.args) != arity if arity is not None else len(node.args) < 2:
            raise UserError(
                f"rule {text!r}: {fname}() takes {arity or 'at least 2'} argument(s)", key=key
            )
        args = [_compile(a, text, key, known, names) for a in node.args]
        fn = FUNCTIONS[fname]
        return lambda env: fn(*(a(env) for a in args))
    raise bad(type(node).__name__)


def _condition(node: ast.AST, text: str, key: str, known: set[str], names: set[str]):
    """COND of ``A if COND else B``: comparisons joined by and / or / not."""
    if isinstance(node, ast.Compare):
        ops = [_COMPARE.get(type(op)) for op in node.ops]
        if None in ops:
            bad = next(op for op in node.ops if type(op) not in _COMPARE)
            raise UserError(f"rule {text!r}: operator {type(bad).__name__} is not allowed", key=key)
        terms = [_compile(t, text, key, known, names) for t in (node.left, *node.comparators)]

        def compare(env):
            values = [t(env) for t in terms]
            return all(op(a, b) for op, a, b in zip(ops, values, values[1:]))

        return compare
    if isinstance(node, ast.BoolOp):
        parts = [_condition(v, text, key, known, names) for v in node.values]
        join = all if isinstance(node.op, ast.And) else any
        return lambda env: join(p(env) for p in parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _condition(node.operand, text, key, known, names)
        return lambda env: not inner(env)
    raise UserError(f"rule {text!r}: a condition must be a comparison such as 'N < 5e8'", key=key)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
