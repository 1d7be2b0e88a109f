"""README promises: the quickstart is two commands, CI runs the README's test command,
and the config and launcher references are the ones generated from the code."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _config_reference():
    spec = importlib.util.spec_from_file_location("cfgref", ROOT / "scripts" / "config_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quickstart_is_two_commands_and_ci_runs_the_test_one():
    block = README.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [ln.split("#")[0].strip() for ln in block.strip().splitlines()]
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_config_reference_is_generated_from_the_code():
    mod = _config_reference()
    inside = README.split(mod.BEGIN, 1)[1].split(mod.END, 1)[0].strip()
    assert inside == mod.reference(), "run: python scripts/config_reference.py --write"


def test_launcher_reference_is_generated_from_the_code():
    mod = _config_reference()
    begin, end = mod.LAUNCHER[:2]
    inside = README.split(begin, 1)[1].split(end, 1)[0].strip()
    assert inside == mod.launcher_reference(), "run: python scripts/config_reference.py --write"
    rows = inside.splitlines()[2:]
    assert all(re.match(r"\| `launcher\.[a-z_]+` \|.*\S \|$", r) for r in rows)  # documented
    assert any("`launcher.setup`" in r for r in rows) and any("`launcher.env`" in r for r in rows)


def test_every_config_field_is_documented():
    rows = _config_reference().reference().splitlines()[2:]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows]
    assert all(len(c) == 5 for c in cells)
    undocumented = [c[0] for c in cells if not c[4]]
    assert not undocumented, undocumented
    assert len(rows) > 40 and all(re.match(r"\| `[a-z_.]+` \|", r) for r in rows)
