"""Run selection: ``--where`` conditions on a runs table, parsed into polars expressions.

A condition is one of two forms:

- ``KEY OP VALUE`` with OP in ``= == != < <= > >=``, e.g. ``recipe=standard``,
  ``optim.weight_decay!=0.1``, ``epochs<=1``, ``member=null``. VALUE is typed by the
  column's dtype (a number for a numeric column, true/false for a boolean one, text
  otherwise; quotes are optional); ``null`` with = / != tests for a missing value.
- a polars expression, e.g. ``pl.col("epochs") <= 1``,
  ``pl.col("model.preset").is_in(["cpu-50k", "cpu-100k"]) & ~(pl.col("member") > 0)``.
  It is parsed with ``ast`` and built node by node from a whitelist (``pl.col``,
  ``pl.lit``, comparisons, ``& | ~``, arithmetic, and the methods in ``EXPR_METHODS`` /
  ``STR_METHODS``), never evaluated: any other name, attribute, call or syntax is
  refused. A constant compared with a bare ``pl.col(...)`` is typed by that column.

Several conditions are ANDed. Every bad condition (unknown column, with a did-you-mean;
untyped value; an integer constant outside 64 bits; refused syntax; a polars error, an
argument out of its range included) is one AnalysisInputError line.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from analysis.errors import AnalysisInputError, did_you_mean

__all__ = ["EXPR_METHODS", "STR_METHODS", "parse_where", "select_runs"]

EXPR_METHODS = frozenset(
    {
        "is_in", "is_between", "is_null", "is_not_null", "is_nan", "is_not_nan", "is_finite",
        "abs", "log", "log10", "exp", "sqrt", "round", "fill_null", "not_", "min", "max",
    }
)  # fmt: skip
"""Methods a ``pl.col(...)`` expression may call in a --where expression."""
STR_METHODS = frozenset({"contains", "starts_with", "ends_with", "to_lowercase", "to_uppercase"})
"""Methods of ``.str`` a --where expression may call (literal patterns only)."""

_SIMPLE = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(==|!=|<=|>=|=|<|>)\s*(.*?)\s*$", re.DOTALL)
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}  # fmt: skip
_SIMPLE_OPS = {"=": operator.eq, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
               "<=": operator.le, ">": operator.gt, ">=": operator.ge}  # fmt: skip
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}  # fmt: skip
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.Invert: operator.invert, ast.USub: operator.neg, ast.UAdd: operator.pos,
}  # fmt: skip
_MAX_LENGTH = 2000
_INT64 = 2**63
"""Integer constants polars can hold lie in [-2^63, 2^63)."""
_ERRORS = (TypeError, ValueError, AttributeError, OverflowError, pl.exceptions.PolarsError)
"""What polars raises on a condition it cannot build or evaluate (an argument out of its
range, e.g. ``round(-1)``, is an OverflowError)."""


def _column(name: Any, schema: Mapping[str, pl.DataType]) -> str:
    if not isinstance(name, str):
        raise AnalysisInputError(f"a column name must be a string, got {name!r}")
    if name not in schema:
        raise AnalysisInputError(
            f"unknown column '{name}'{did_you_mean(name, schema)}; "
            f"the runs table has {sorted(schema)}"
        )
    return name


def _typed(value: Any, column: str, dtype: pl.DataType) -> Any:
    """``value`` (text or a constant) as the type of ``column``; None stays None."""
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, str) and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    if dtype.is_numeric():
        if isinstance(value, bool):
            raise AnalysisInputError(f"column '{column}' is {dtype}; {value!r} is not a number")
        try:
            number = float(text)
        except ValueError:
            raise AnalysisInputError(
                f"column '{column}' is {dtype}; {text!r} is not a number"
            ) from None
        return int(number) if dtype.is_integer() and number.is_integer() else number
    if dtype == pl.Boolean:
        if isinstance(value, bool):
            return value
        if text.lower() not in ("true", "false"):
            raise AnalysisInputError(
                f"column '{column}' is Boolean; use true or false, not {text!r}"
            )
        return text.lower() == "true"
    return text


def _simple(match: re.Match, schema: Mapping[str, pl.DataType]) -> pl.Expr:
    key, op, raw = match.groups()
    column = _column(key, schema)
    if raw.lower() in ("null", "none"):
        if op in ("=", "=="):
            return pl.col(column).is_null()
        if op == "!=":
            return pl.col(column).is_not_null()
        raise AnalysisInputError(f"'{op} null' is not a condition; use = null or != null")
    if raw == "":
        raise AnalysisInputError(f"no value after '{key}{op}'")
    return _SIMPLE_OPS[op](pl.col(column), _typed(raw, column, schema[column]))


class _Builder:
    """Builds a polars expression from a whitelisted ``ast`` tree (never evaluates code)."""

    def __init__(self, schema: Mapping[str, pl.DataType]):
        self.schema = schema

    def build(self, node: ast.AST) -> Any:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise AnalysisInputError(f"{_describe(node)} is not allowed in a --where expression")
        return method(node)

    def _Expression(self, node: ast.Expression) -> Any:
        return self.build(node.body)

    def _Constant(self, node: ast.Constant) -> Any:
        value = node.value
        if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
            raise AnalysisInputError(f"integer {_digits(value)} does not fit in 64 bits")
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise AnalysisInputError(f"constant {value!r} is not allowed")

    def _List(self, node: ast.List | ast.Tuple) -> list[Any]:
        return [self._constant(e) for e in node.elts]

    _Tuple = _List

    def _BinOp(self, node: ast.BinOp) -> Any:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise AnalysisInputError(f"operator {type(node.op).__name__} is not allowed")
        left, right = self.build(node.left), self.build(node.right)
        if not isinstance(left, pl.Expr) and not isinstance(right, pl.Expr):
            # never Python arithmetic on user constants (10**10**10 would hang)
            raise AnalysisInputError("arithmetic needs a pl.col(...) or pl.lit(...) operand")
        return op(left, right)

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        if isinstance(node.op, ast.Not):
            raise AnalysisInputError("'not' does not work on polars expressions; use ~")
        return _UNARY[type(node.op)](self.build(node.operand))

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        raise AnalysisInputError("'and'/'or' do not work on polars expressions; use & and |")

    def _Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise AnalysisInputError("chained comparisons are not allowed; use & or .is_between")
        left, right = node.left, node.comparators[0]
        op = _COMPARE.get(type(node.ops[0]))
        if op is None:
            raise AnalysisInputError(
                f"comparison {type(node.ops[0]).__name__} is not allowed; use .is_in"
            )
        return op(self._operand(left, right), self._operand(right, left))

    def _operand(self, node: ast.AST, other: ast.AST) -> Any:
        """A constant compared with a bare ``pl.col(name)`` takes that column's type."""
        column = self._bare_column(other)
        if isinstance(node, ast.Constant) and column is not None:
            return _typed(self._Constant(node), column, self.schema[column])
        return self.build(node)

    def _bare_column(self, node: ast.AST) -> str | None:
        if (
            isinstance(node, ast.Call)
            and _is_pl(node.func, "col")
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
        ):
            return _column(node.args[0].value, self.schema)
        return None

    def _Call(self, node: ast.Call) -> Any:
        func = node.func
        if not isinstance(func, ast.Attribute) or (
            isinstance(func.value, ast.Name) and func.attr not in ("col", "lit")
        ):
            raise AnalysisInputError(
                f"calling {_describe(func)} is not allowed; only pl.col, pl.lit and "
                "expression methods"
            )
        if _is_pl(func, "col") or _is_pl(func, "lit"):
            if len(node.args) != 1 or node.keywords:
                raise AnalysisInputError(f"pl.{func.attr} takes exactly one argument")
            value = self._constant(node.args[0])
            return pl.col(_column(value, self.schema)) if func.attr == "col" else pl.lit(value)
        receiver, allowed = func.value, EXPR_METHODS
        if isinstance(receiver, ast.Attribute) and receiver.attr == "str":
            receiver, allowed = receiver.value, STR_METHODS
        target = self.build(receiver)  # inner problems first: they are the likelier cause
        if func.attr not in allowed:
            raise AnalysisInputError(
                f"method .{func.attr}() is not allowed; allowed: {sorted(allowed)}"
                f"{did_you_mean(func.attr, allowed)}"
            )
        if not isinstance(target, pl.Expr):
            raise AnalysisInputError(f".{func.attr}() must follow pl.col(...)")
        if allowed is STR_METHODS:
            target = target.str
        args = [self._argument(a) for a in node.args]
        kwargs = {k.arg: self._argument(k.value) for k in node.keywords if k.arg is not None}
        if len(kwargs) != len(node.keywords):
            raise AnalysisInputError("**keyword unpacking is not allowed")
        if allowed is STR_METHODS and func.attr == "contains":
            kwargs["literal"] = True  # never a user-supplied regex
        return getattr(target, func.attr)(*args, **kwargs)

    def _argument(self, node: ast.AST) -> Any:
        return self._constant(node) if isinstance(node, (ast.List, ast.Tuple)) else self.build(node)

    def _constant(self, node: ast.AST) -> Any:
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._List(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self._constant(node.operand)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return -value
        if isinstance(node, ast.Constant):
            return self._Constant(node)
        raise AnalysisInputError(f"{_describe(node)} is not a constant")


def _is_pl(node: ast.AST, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "pl"
    )


def _digits(value: int) -> str:
    """A huge integer for a message: its first digits and its length."""
    text = str(abs(value))
    return f"{'-' if value < 0 else ''}{text[:12]}... ({len(text)} digits)"


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"name '{node.id}'"
    if isinstance(node, ast.Attribute):
        return f"attribute '.{node.attr}'"
    return f"{type(node).__name__}"


def parse_where(text: str, schema: Mapping[str, pl.DataType]) -> pl.Expr:
    """One --where condition (see the module docstring) as a polars expression, checked
    against ``schema`` (column name -> dtype, e.g. ``frame.schema``)."""
    if not isinstance(text, str) or not text.strip():
        raise AnalysisInputError("where: empty condition")
    if len(text) > _MAX_LENGTH:
        raise AnalysisInputError(f"where: condition longer than {_MAX_LENGTH} characters")
    try:
        simple = None if text.lstrip().startswith(("pl.", "(", "~")) else _SIMPLE.match(text)
        if simple is not None:
            return _simple(simple, schema)
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as err:
            raise AnalysisInputError(
                f"neither KEY=VALUE nor a polars expression ({err.msg})"
            ) from None
        expr = _Builder(schema).build(tree)
    except AnalysisInputError as err:
        raise AnalysisInputError(f"where {text!r}: {err}") from None
    except RecursionError:
        raise AnalysisInputError(f"where {text[:40]!r}...: nested too deeply") from None
    except _ERRORS as err:
        raise AnalysisInputError(f"where {text!r}: {_first_line(err)}") from None
    if not isinstance(expr, pl.Expr):
        raise AnalysisInputError(f"where {text!r}: not a condition on columns")
    return expr


def select_runs(frame: pl.DataFrame, where: Sequence[str] = ()) -> pl.DataFrame:
    """The rows of ``frame`` meeting every condition in ``where`` (ANDed)."""
    for text in where:
        expr = parse_where(text, frame.schema)
        try:
            mask = frame.select(expr.alias("_where")).to_series()
        except _ERRORS as err:
            raise AnalysisInputError(f"where {text!r}: {_first_line(err)}") from None
        if mask.dtype != pl.Boolean:
            raise AnalysisInputError(f"where {text!r}: gives {mask.dtype} values, not true/false")
        frame = frame.filter(mask.fill_null(False))
    return frame
