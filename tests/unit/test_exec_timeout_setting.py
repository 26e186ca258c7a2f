"""exec_timeout: how long a kubeconfig's exec credential plugin may take; 30 s unless the config, GPUTUI_EXEC_TIMEOUT
or --exec-timeout (before or after the subcommand) says otherwise; positive and finite, else one line."""

from __future__ import annotations

import pytest

from gputui.cli.common import UsageError
from gputui.cli.parser import build_parser, settings_from
from gputui.settings import SettingsError, load_settings


def test_thirty_seconds_unless_told(tmp_path):
    assert load_settings({}, env={}, config_path=tmp_path / "none").exec_timeout == 30.0


def test_config_then_environment_then_flag(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("exec_timeout: 12\n")
    assert load_settings({}, env={}, config_path=config).exec_timeout == 12.0
    assert load_settings({}, env={"GPUTUI_EXEC_TIMEOUT": "7.5"}, config_path=config).exec_timeout == 7.5
    assert load_settings({"exec_timeout": 2.0}, env={"GPUTUI_EXEC_TIMEOUT": "7.5"}, config_path=config).exec_timeout == 2.0


@pytest.mark.parametrize("argv", [["--exec-timeout", "4", "nodes"], ["nodes", "--exec-timeout", "4"], ["--exec-timeout", "4"]])
def test_the_flag_before_or_after_the_subcommand(argv, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUTUI_CONFIG", str(tmp_path / "none.yaml"))
    monkeypatch.delenv("GPUTUI_EXEC_TIMEOUT", raising=False)
    assert settings_from(build_parser().parse_args(argv)).exec_timeout == 4.0


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "-inf", "soon"])
def test_not_positive_and_finite_is_one_line(value, tmp_path):
    with pytest.raises(SettingsError, match="exec_timeout"):
        load_settings({}, env={"GPUTUI_EXEC_TIMEOUT": value}, config_path=tmp_path / "none")
    with pytest.raises(UsageError, match="--exec-timeout"):
        build_parser().parse_args(["--exec-timeout", value])
