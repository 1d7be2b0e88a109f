"""Derive rules: the safe expression language (scalelab/sweep/spec/rules.py)."""

import math

import pytest

from scalelab.errors import UserError
from scalelab.sweep.spec.rules import order_rules, parse_rule

KNOWN = ["model.d_model", "optim.lr", "data.epochs", "data.unique_tokens"]


def ev(text, **env):
    env = {k.replace("__", "."): v for k, v in env.items()}
    return parse_rule("optim.lr", text, KNOWN).evaluate(env)


@pytest.mark.parametrize(
    "text, env, expected",
    [
        ("20 * N", {"N": 51936.0}, 20 * 51936.0),
        ("3e-3 * (256 / model.d_model)", {"model.d_model": 512.0}, 3e-3 * 0.5),
        ("2 ** -10", {}, 2.0**-10),
        ("-optim.lr + 1", {"optim.lr": 0.25}, 0.75),
        ("min(1, 2, 0.5) + max(3, 4)", {}, 4.5),
        ("log(100) / log(10)", {}, 2.0),
        ("sqrt(N_non_embedding)", {"N_non_embedding": 16.0}, 4.0),
        ("exp(0) + floor(2.7) + ceil(2.1) + round(2.5)", {}, 1 + 2 + 3 + 2),
        ("data.unique_tokens / data.epochs", {"data.unique_tokens": 100.0, "data.epochs": 4.0}, 25.0),
        ("1 if N < 5e8 else 4", {"N": 4.9e8}, 1.0),
        ("1 if N < 5e8 else 4", {"N": 5e8}, 4.0),
        ("1 if 1 <= N < 3 else 2", {"N": 3.0}, 2.0),
        ("1 if N == 2 or not N != 3 else 2", {"N": 3.0}, 1.0),
        ("1 if N >= 2 and N > 9 else 2 if N > 1 else 3", {"N": 2.0}, 2.0),
        ("ladder(N, 60, 240, 1440)", {"N": 61.0}, 240.0),
        ("ladder(N, 60, 240, 1440)", {"N": 60.0}, 60.0),
        ("ladder(N, 60, 240, 1440)", {"N": 1e6}, 1440.0),
        ("1 if N > 0 else 1 / 0", {"N": 1.0}, 1.0),  # only the branch taken is evaluated
    ],
)
def test_rules_compute_like_python(text, env, expected):
    rule = parse_rule("optim.lr", text, KNOWN)
    assert rule.evaluate(env) == pytest.approx(expected, rel=1e-15)


def test_names_are_collected():
    rule = parse_rule("optim.lr", "3e-3 * (256 / model.d_model) + 0 * N", KNOWN)
    assert rule.names == {"model.d_model", "N"}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("3 * (", "syntax error"),
        ("model.d_modl * 2", "unknown name 'model.d_modl' (did you mean 'model.d_model'?)"),
        ("Nn * 2", "unknown name 'Nn' (did you mean 'N'?)"),
        ("sqr(4)", "unknown function 'sqr' (did you mean 'sqrt'?)"),
        ("__import__('os').system('true')", "unknown function"),
        ("(lambda: 1)()", "unknown function"),
        ("'a' * 3", "constant 'a' is not allowed"),
        ("True + 1", "constant True is not allowed"),
        ("[1, 2][0]", "Subscript is not allowed"),
        ("1 if N else 2", "a condition must be a comparison such as 'N < 5e8'"),
        ("N > 2", "a comparison is only allowed as the condition of 'A if COND else B'"),
        ("1 if N > 2 and 3 else 2", "a condition must be a comparison"),
        ("1 if N in [1] else 2", "operator In is not allowed"),
        ("1 if N is 2 else 2", "operator Is is not allowed"),
        ("(N > 2) + 1", "a comparison is only allowed as the condition"),
        ("not N", "operator Not is not allowed"),
        ("ladder(1)", "ladder() takes at least 2 argument"),
        ("7 // 2", "operator FloorDiv is not allowed"),
        ("7 % 2", "operator Mod is not allowed"),
        ("sqrt(1, 2)", "sqrt() takes 1 argument"),
        ("min(1)", "min() takes at least 2 argument"),
        ("log(x=1)", "keyword argument is not allowed"),
        ("", "expected a rule string"),
    ],
)
def test_parse_errors_are_one_line_user_errors(text, fragment):
    with pytest.raises(UserError) as info:
        parse_rule("optim.lr", text, KNOWN)
    message = str(info.value)
    assert fragment in message
    assert "derive.optim.lr" in message and "\n" not in message


@pytest.mark.parametrize(
    "text, env, fragment",
    [
        ("1 / (model.d_model - 64)", {"model.d_model": 64.0}, "division by zero"),
        ("sqrt(-N)", {"N": 4.0}, "math error"),
        ("log(0)", {}, "math error"),
        ("10 ** 10 ** 10", {}, "numeric overflow"),
        ("(-8) ** 0.5", {}, "not a finite real number"),
        ("ladder(N, 240, 60)", {"N": 1.0}, "ladder() rungs must increase"),
    ],
)
def test_evaluation_errors(text, env, fragment):
    rule = parse_rule("optim.lr", text, KNOWN)
    with pytest.raises(UserError) as info:
        rule.evaluate(env)
    assert fragment in str(info.value) and "derive.optim.lr" in str(info.value)


def test_non_string_rule_is_an_error():
    with pytest.raises(UserError, match="expected a rule string"):
        parse_rule("optim.lr", 3.0, KNOWN)


def test_order_follows_dependencies_and_rejects_cycles():
    known = ["optim.lr", "optim.weight_decay", "data.epochs"]
    rules = {
        "optim.weight_decay": parse_rule("optim.weight_decay", "optim.lr * 10", known),
        "optim.lr": parse_rule("optim.lr", "1e-3 * data.epochs", known),
    }
    assert [r.target for r in order_rules(rules)] == ["optim.lr", "optim.weight_decay"]
    cyclic = {
        "optim.lr": parse_rule("optim.lr", "optim.weight_decay", known),
        "optim.weight_decay": parse_rule("optim.weight_decay", "optim.lr", known),
    }
    with pytest.raises(UserError, match="cycle"):
        order_rules(cyclic)


def test_float_arithmetic_not_integer():
    # Integer powers would be exact and unbounded in Python ints; rules are float64.
    assert ev("2 ** 60 + 1") == float(2**60)
    assert math.isfinite(ev("10 ** 300"))
