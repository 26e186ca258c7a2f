"""The gputui command as a user runs it: exit codes, one-line errors, JSON shape."""

import json

import pytest

from gputui.vocabulary.gpu_metrics import BY_NAME
from tests.support.gputui_cli import run


def test_version():
    out = run("--version")
    assert out.returncode == 0
    assert out.stdout.startswith("gputui ")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--refresh", "0"], "positive"),
        (["--refresh", "-2"], "positive"),
        (["--refresh", "abc"], "not a number"),
        (["--demo", "--theme", "no-such-theme"], "unknown theme 'no-such-theme'"),
        (["--demo", "--keymap", "emacs"], "unknown keymap 'emacs'; available: default, k9s, vim"),
        (["--demo", "--wallboard", "--rotate", "0"], "positive"),
        (["nodes", "--demo", "-o", "yaml"], "invalid choice"),
        (["--demo", "--dcgm-interval", "-1"], "argument --dcgm-interval: must be 0 or more seconds, got -1"),
        (["--demo", "--dcgm-interval", "7200"], "argument --dcgm-interval: must be at most 3600 seconds"),
        (["--demo", "--dcgm-interval", "often"], "argument --dcgm-interval: 'often' is not a number"),
        (["--config", "/nonexistent/gputui.yaml"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, fragment):
    out = run(*args, home=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("gputui: error:")
    assert fragment in lines[0]
    assert "Traceback" not in out.stderr


def test_a_bad_theme_file_asked_for_by_name_says_why(tmp_path):
    themes = tmp_path / ".config" / "gputui" / "themes"
    themes.mkdir(parents=True)
    (themes / "mine.yaml").write_text('name: mine\nprimary: "#zzz"\n')
    out = run("--demo", "--theme", "mine", home=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == f"gputui: error: theme 'mine' cannot be used: {themes / 'mine.yaml'}: primary: bad colour '#zzz'"


def test_bad_config_file_is_one_line(tmp_path):
    cfg = tmp_path / ".config" / "gputui"
    cfg.mkdir(parents=True)
    (cfg / "config.yaml").write_text("refresh: [\n")
    out = run("nodes", "--demo", home=tmp_path)
    assert out.returncode == 2
    assert "not valid YAML" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_nodes_json_shape(tmp_path):
    out = run("nodes", "--demo", "--seed", "7", "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    nodes = json.loads(out.stdout)
    assert isinstance(nodes, list) and len(nodes) >= 24
    for node in nodes:
        assert {"name", "state", "gpu_model", "gpus_allocated", "gpus_total", "driver_version", "alerts", "gpus"} <= set(node)
        assert isinstance(node["alerts"], list)
        for gpu in node["gpus"]:
            # every figure of gputui.vocabulary.gpu_metrics by its name (null when unknown), the first five as they always were
            assert set(gpu) == {"index", "uuid", "faults", *BY_NAME} >= {"util_pct", "mem_used_mib", "mem_total_mib", "temp_c",
                                                              "power_w"}
    xid = next(n for n in nodes if n["name"] == "gpu-h100-07")
    assert any("XID" in a for a in xid["alerts"])
    assert xid["gpus_total"] == 7


def test_nodes_table_and_global_flags_before_subcommand(tmp_path):
    out = run("--demo", "nodes", home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "gpu-h100-01" in out.stdout and "SIMULATED" in out.stdout
    assert "≠535.183.01" in out.stdout  # drift marked without colour


def test_headless_never_falls_back_to_the_demo(tmp_path):
    """The bug: with no kubeconfig, `gputui drain NODE` drained the simulated cluster, said "drained" and
    exited 0. A headless command now stops with one line unless --demo was given."""
    for args in (("nodes", "-o", "json"), ("drain", "gpu-h100-01"), ("drain", "gpu-h100-01", "--dry-run"),
                 ("shift", "llm/llama-3-70b-instruct", "--to", "v1=50", "--to", "v2=50")):
        out = run(*args, home=tmp_path)
        assert out.returncode == 2, (args, out.stdout)
        assert out.stderr.count("\n") == 1 and "no kubeconfig found" in out.stderr and "--demo" in out.stderr
        assert "Traceback" not in out.stderr and out.stdout == ""


def test_demo_output_always_says_simulated(tmp_path):
    nodes = json.loads(run("--demo", "nodes", "-o", "json", home=tmp_path).stdout)
    assert len(nodes) >= 24 and all(n["simulated"] is True for n in nodes)
    plan = json.loads(run("--demo", "drain", "gpu-l40s-01", "--dry-run", "-o", "json", home=tmp_path).stdout)
    assert plan["simulated"] is True
    text = run("--demo", "drain", "gpu-l40s-01", "--dry-run", home=tmp_path).stdout
    assert text.startswith("# SIMULATED")
    done = run("--demo", "drain", "gpu-l40s-05", "--session-deadline", "1s", home=tmp_path)
    assert "SIMULATED" in done.stdout.splitlines()[0] and "SIMULATED" in done.stdout.splitlines()[-1]
    # Its writes went to the demo's own audit file, never the real one.
    state = tmp_path / ".state" / "gputui"
    assert (state / "audit-demo.jsonl").exists() and not (state / "audit.jsonl").exists()
