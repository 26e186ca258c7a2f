"""Headless commands against clusters that cannot answer: one line, exit 2 (how soon: benchmarks/reaction_times.py)."""

import yaml

from tests.support.gputui_cli import closed_port, kubeconfig, run


def assert_one_line_error(out, fragment: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: error:"), out.stderr
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in out.stderr
    assert "s3cret-token-value" not in out.stderr + out.stdout  # secrets are never printed


def test_missing_kubeconfig_flag(tmp_path):
    assert_one_line_error(run("nodes", "--kubeconfig", str(tmp_path / "nope"), home=tmp_path), "does not exist")


def test_malformed_kubeconfig(tmp_path):
    bad = tmp_path / "kc"
    bad.write_text("clusters: [\n")
    assert_one_line_error(run("nodes", "--kubeconfig", str(bad), home=tmp_path), "kubeconfig")


def test_unknown_context(tmp_path):
    kc = kubeconfig(tmp_path / "kc", "https://127.0.0.1:1")
    assert_one_line_error(run("nodes", "--kubeconfig", kc, "--context", "elsewhere", home=tmp_path), 'context "elsewhere"')


def test_unreachable_server_is_one_line_naming_the_refused_connection(tmp_path):
    """How soon it says so is a figure, not an assertion: benchmarks/reaction_times.py --only unreachable."""
    kc = kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{closed_port()}")
    out = run("nodes", "--kubeconfig", kc, home=tmp_path)
    assert_one_line_error(out, "connection refused")


def test_kubeconfig_env_with_several_files_is_merged(tmp_path):
    first = kubeconfig(tmp_path / "a", f"https://127.0.0.1:{closed_port()}", contexts=("alpha",))
    second = tmp_path / "b"
    second.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "contexts": [{"name": "beta", "context": {"cluster": "c", "user": "u"}}]}))
    out = run("nodes", "--context", "beta", env={"KUBECONFIG": f"{first}:{second}"}, home=tmp_path)
    assert_one_line_error(out, "connection refused")  # beta was found in the second file


def test_a_kubeconfig_variable_naming_a_path_too_long_to_look_up_is_one_line(tmp_path):
    """os.stat's 'File name too long' on a KUBECONFIG entry crashed gputui (exit 70, the traceback in a file)."""
    out = run("nodes", home=tmp_path, env={"KUBECONFIG": str(tmp_path / ("x" * 300))})
    assert_one_line_error(out, "cannot be read: File name too long")
