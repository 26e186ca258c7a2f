"""Command-mode parsing and completion."""

from __future__ import annotations

import pytest

from gputui.ui.keys.commands import Command, CommandError, complete, parse

CHOICES = {
    "node": ["gpu-h100-01", "gpu-h100-07", "gpu-a100-01"],
    "service": ["llm/llama-3-70b-instruct", "llm/mistral-7b"],
    "theme": ["gputui-dark", "gputui-light"],
    "namespace": ["all", "llm", "research"],
}


@pytest.mark.parametrize("line, command", [
    (":nodes", Command("nodes", None)),
    ("svc", Command("services", None)),
    (":drain gpu-h100-07", Command("drain", "gpu-h100-07")),
    (":theme", Command("theme", None)),  # no name: the picker
    (":ns all", Command("ns", "all")),
    (":q", Command("quit", None)),
    ("  :shift   llm/mistral-7b ", Command("shift", "llm/mistral-7b")),
    (":ctx prod-eu", Command("ctx", "prod-eu")),  # contexts are checked when connecting
])
def test_parse(line, command):
    assert parse(line, CHOICES) == command


@pytest.mark.parametrize("line, message", [
    ("", "empty command; try :help"),
    (":dran gpu-h100-01", "unknown command :dran; did you mean :drain?"),
    (":zzz", "unknown command :zzz; try :help"),
    (":drain", ":drain needs a node name"),
    (":drain gpu-h100-99", "no node 'gpu-h100-99'"),
    (":nodes gpu-h100-01", ":nodes takes no argument"),
    (":drain a b", ":drain takes one node"),
    (":theme neon", "no theme 'neon'"),
])
def test_parse_errors_are_one_clear_line(line, message):
    with pytest.raises(CommandError) as info:
        parse(line, CHOICES)
    assert str(info.value) == message


def test_complete_command_names_then_arguments():
    assert complete(":dr", CHOICES) == ["drain "]
    assert complete("", CHOICES)[:3] == ["nodes", "services", "diag"]
    assert complete("drain gpu-h", CHOICES) == ["drain gpu-h100-01", "drain gpu-h100-07"]
    assert complete("drain h100-07", CHOICES) == ["drain gpu-h100-07"]  # contains, after prefix matches
    assert complete("theme gputui-l", CHOICES) == ["theme gputui-light"]
    assert complete("nodes x", CHOICES) == []
    assert complete("svc", CHOICES) == ["services"]
