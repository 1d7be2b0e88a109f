"""A sweep's plan carries each block axis for every run: a block that sets a key in its
``base`` (not as an axis) gets its value in that column, not null."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_helpers import TINY_BASE, plan_of


def test_a_block_base_value_fills_the_axis_column(tmp_path):
    spec = {
        "name": "s", "base": TINY_BASE,
        "blocks": [
            {"name": "tuned", "grid": {"optim.weight_decay": [0.1, 1.0]}},
            {"name": "standard", "base": {"optim": {"weight_decay": 0.1}, "data": {"epochs": 2}},
             "grid": {"optim.lr": [1e-3, 3e-3]}},
            {"name": "plain", "base": {"optim": {"weight_decay": 0.3}}},
        ],
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    plan = plan_of(path)
    table = plan.table
    assert table["block"].to_list() == ["tuned", "tuned", "standard", "standard", "plain"]
    assert table["optim.weight_decay"].to_list() == [0.1, 1.0, 0.1, 0.1, 0.3]
    lr = table["optim.lr"].to_list()
    assert lr[2:4] == [1e-3, 3e-3]
    assert lr[0] == lr[1] == lr[4] == plan.configs[0].optim.lr  # the base lr, not null
    for cfg, wd in zip(plan.configs, table["optim.weight_decay"]):  # the column is the config
        assert cfg.optim.weight_decay == wd
