"""A kubeconfig gputui cannot use is one line that names the file and what is wrong with it, for every headless
command, and exit 2 (issue 35: a file of the wrong shape said "TypeError: 'str' object does not support item
assignment", a KUBECONFIG naming only missing files "Invalid kube-config file. No configuration found.")."""

from __future__ import annotations

import pytest

from gputui.cli.main import main
from tests.support.cli_commands import COMMANDS

BAD = {
    # name: (file text or None for no file, what the line must say besides the path)
    "not YAML": ("clusters: [\n", "line 2: not valid YAML"),
    "a string": ("just a string\n", "is not a kubeconfig: a YAML string, not a mapping"),
    "a list": ("- a\n- b\n", "is not a kubeconfig: a YAML list, not a mapping"),
    "empty": ("", "is empty"),
    "contexts not a list": ("apiVersion: v1\ncontexts: oops\n", "contexts is a string, not a list"),
    "a cluster not a mapping": ("clusters:\n- name: a\n  cluster: x\n", "clusters[0] (a): cluster is a string"),
    "an entry without a name": ("users:\n- user: {}\n", "users[0] has no name"),
    "not UTF-8": (b"\xff\xfe clusters", "is not UTF-8 text"),
    "missing": (None, "does not exist"),
}


def _file(tmp_path, content) -> str:
    path = tmp_path / "kubeconfig.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    return str(path)


def one_line(capsys) -> str:
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: error: "), out.err
    assert "Traceback" not in out.err and "object" not in out.err and "Invalid kube-config" not in out.err, out.err
    return lines[0]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("KUBECONFIG", raising=False)


@pytest.mark.parametrize("kind", list(BAD))
def test_each_bad_kubeconfig_is_one_line_naming_the_file(kind, tmp_path, capsys):
    content, says = BAD[kind]
    path = _file(tmp_path, content)
    assert main(["nodes", "--kubeconfig", path]) == 2
    line = one_line(capsys)
    assert path in line and says in line, line


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_says_the_same_and_exits_2(name, tmp_path, capsys):
    path = _file(tmp_path, "just a string\n")
    assert main([*COMMANDS[name], "--kubeconfig", path]) == 2
    line = one_line(capsys)
    assert line == f"gputui: error: kubeconfig {path} is not a kubeconfig: a YAML string, not a mapping of " \
                   "clusters, contexts and users"


def test_kubeconfig_variable_naming_only_missing_files_names_them(tmp_path, monkeypatch, capsys):
    gone = [str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]
    monkeypatch.setenv("KUBECONFIG", ":".join(gone))
    assert main(["nodes"]) == 2
    assert one_line(capsys) == f"gputui: error: kubeconfig {gone[0]}, {gone[1]} do not exist (KUBECONFIG)"
    # one bad file among good ones: that file is named, not the list
    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: v1\nclusters: []\ncontexts: []\nusers: []\n")
    bad = _file(tmp_path, "- a\n")
    monkeypatch.setenv("KUBECONFIG", f"{good}:{bad}")
    assert main(["nodes"]) == 2
    line = one_line(capsys)
    assert bad in line and str(good) not in line, line
