"""README promises: the quickstart is two commands, CI runs the README's test command,
the README is a first page whose every link resolves, and the config and launcher
references (docs/reference.md) are the ones generated from the code."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()


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
    inside = REFERENCE.split(mod.BEGIN, 1)[1].split(mod.END, 1)[0].strip()
    assert inside == mod.reference(), "run: python scripts/config_reference.py --write"


def test_launcher_reference_is_generated_from_the_code():
    mod = _config_reference()
    begin, end = mod.LAUNCHER[:2]
    inside = REFERENCE.split(begin, 1)[1].split(end, 1)[0].strip()
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


def test_readme_is_a_first_page_and_every_link_resolves():
    """At most 150 lines; every relative link of the README, and of the docs pages it
    sends readers to, names a file that exists (an anchor: a heading of that file)."""
    assert len(README.splitlines()) <= 150
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor:
                heads = re.findall(r"^#+ (.+)$", dest.read_text(), flags=re.M)
                slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in heads}
                if anchor not in slugs:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
