"""``scalelab explain A B``: identity vs operational differences between two runs."""

import pytest
import yaml

from scalelab import strict
from scalelab.cli import main
from scalelab.config import RunConfig, load_run_config
from scalelab.identity import run_id
from scalelab.sweep.view.explain import diff_configs, explain


def write(path, **overrides):
    tree = strict.to_dict(RunConfig())
    for key, value in overrides.items():
        strict.set_dotted(tree, key.replace("__", "."), value)
    path.write_text(yaml.safe_dump(tree))
    return path


def run(argv, capsys):
    with pytest.raises(SystemExit) as code:
        main(argv)
    captured = capsys.readouterr()
    return code.value.code, captured.out, captured.err


def test_identity_fields_named(tmp_path, capsys):
    a = write(tmp_path / "a.yaml", optim__lr=1e-3, train__eval_every=10)
    run_dir = tmp_path / "run-b"
    run_dir.mkdir()
    # A run directory's config.yaml: the resolved config with derived quantities.
    b_cfg = strict.to_dict(load_run_config(write(tmp_path / "b.yaml", optim__lr=3e-3,
                                                 data__epochs=2.0, train__eval_every=20)))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"config": b_cfg, "derived": {}}))
    code, out, err = run(["explain", str(a), str(run_dir)], capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].endswith(f"(run id {run_id(load_run_config(a))})")
    assert "2 identity field(s) differ (these change the run id):" in lines
    assert "  data.epochs: 1.0 -> 2.0" in lines and "  optim.lr: 0.001 -> 0.003" in lines
    assert "  train.eval_every: 10 -> 20" in lines  # listed apart, as operational
    assert lines.index("  train.eval_every: 10 -> 20") > lines.index("  optim.lr: 0.001 -> 0.003")


def test_only_operational_fields_means_same_run_id(tmp_path, capsys):
    a = write(tmp_path / "a.yaml", train__log_every=1, name="x")
    b = write(tmp_path / "b.yaml", train__log_every=5, name="y")
    ex = explain(a, b)
    assert ex.same_id and ex.identity == []
    assert [k for k, _, _ in ex.operational] == ["name", "train.log_every"]
    code, out, _ = run(["explain", str(a), str(b)], capsys)
    assert code == 0 and f"same run id {ex.id_a}: only operational fields differ" in out
    same = explain(a, a)
    assert same.same_id and same.lines()[-1].endswith("the configs are identical")


def test_extra_and_nested_values():
    a = RunConfig(extra={"recipe": "standard"})
    b = RunConfig(extra={"recipe": "regularized", "k": 1})
    identity, operational = diff_configs(a, b)
    assert [k for k, _, _ in identity] == ["extra.k", "extra.recipe"] and operational == []


def test_bad_paths_exit_2(tmp_path, capsys):
    code, _, err = run(["explain", str(tmp_path / "nope"), str(tmp_path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "no such run directory" in err
    code, _, err = run(["explain", str(tmp_path), str(tmp_path)], capsys)
    assert code == 2 and "no config.yaml or config-input.yaml" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("optim: {lrr: 1}\n")
    code, _, err = run(["explain", str(bad), str(bad)], capsys)
    assert code == 2 and "did you mean 'lr'?" in err and "Traceback" not in err
