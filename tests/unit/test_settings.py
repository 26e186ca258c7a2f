from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.settings import Settings, SettingsError, load_settings


def test_layers_override_in_order(tmp_path: Path):
    config = tmp_path / "config.yaml"
    config.write_text("refresh: 5\ntheme: file-theme\ntemp_threshold: 80\n")
    s = load_settings({}, env={}, config_path=config)
    assert (s.refresh, s.theme, s.temp_threshold) == (5.0, "file-theme", 80.0)
    s = load_settings({}, env={"GPUTUI_REFRESH": "3"}, config_path=config)
    assert s.refresh == 3.0 and s.theme == "file-theme"
    s = load_settings({"refresh": 1.5}, env={"GPUTUI_REFRESH": "3"}, config_path=config)
    assert s.refresh == 1.5


def test_dcgm_interval_and_label_settings_from_the_environment(tmp_path: Path):
    config = tmp_path / "config.yaml"
    config.write_text("dcgm_interval: 30\n")
    assert load_settings({}, env={}, config_path=config).dcgm_interval == 30.0
    s = load_settings({}, env={"GPUTUI_DCGM_INTERVAL": "0", "GPUTUI_HOST_LABEL": "node",
                               "GPUTUI_SERVICE_LABELS": "team.example.com/model,app",
                               "GPUTUI_VERSION_LABELS": "team.example.com/rev"}, config_path=config)
    assert (s.dcgm_interval, s.host_label) == (0.0, "node")
    assert s.service_labels == ("team.example.com/model", "app") and s.version_labels == ("team.example.com/rev",)
    with pytest.raises(SettingsError, match="dcgm_interval must be between 0 and 3600"):
        load_settings({"dcgm_interval": 7200.0}, env={}, config_path=config)
    with pytest.raises(SettingsError, match=r"GPUTUI_SERVICE_LABELS|service_labels"):
        load_settings({}, env={"GPUTUI_SERVICE_LABELS": "bad label!"}, config_path=config)


def test_the_metrics_query_timeout_from_config_or_environment_reaches_the_reader(tmp_path: Path):
    from gputui.backends.kube_backend import prom_config

    config = tmp_path / "config.yaml"
    config.write_text("prometheus: http://prom:9090\nprometheus_timeout: 20\n")
    assert prom_config(load_settings({}, env={}, config_path=config)).timeout == 20.0
    s = load_settings({}, env={"GPUTUI_PROMETHEUS_TIMEOUT": "7.5"}, config_path=config)
    assert prom_config(s).timeout == 7.5
    assert prom_config(Settings(prometheus="http://p")).timeout == 3.0  # the default
    for bad in ("0", "-1", "900", "soon"):
        with pytest.raises(SettingsError, match=r"prometheus_timeout|PROMETHEUS_TIMEOUT"):
            load_settings({}, env={"GPUTUI_PROMETHEUS_TIMEOUT": bad}, config_path=config)


def test_missing_config_file_is_defaults(tmp_path: Path):
    assert load_settings({}, env={}, config_path=tmp_path / "none.yaml") == Settings()


def test_wallboard_is_read_only(tmp_path: Path):
    assert load_settings({"wallboard": True}, env={}, config_path=tmp_path / "x").read_only


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("refresh: 0\n", "positive"),
        ("refresh: -1\n", "positive"),
        ("refresh: soon\n", "refresh: 'soon' is not a number"),
        ("colour: blue\n", "unknown setting 'colour'"),
        ("- a\n- b\n", "mapping"),
        ("refresh: [1\n", "not valid YAML"),
    ],
)
def test_bad_config_is_one_clear_line(tmp_path: Path, text: str, fragment: str):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    with pytest.raises(SettingsError) as err:
        load_settings({}, env={}, config_path=config)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@given(st.dictionaries(st.text(min_size=1, max_size=12), st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=True), st.none(), st.booleans()), max_size=4))
def test_any_config_mapping_loads_or_fails_cleanly(tmp_path_factory, data):
    import yaml

    config = tmp_path_factory.mktemp("cfg") / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    try:
        s = load_settings({}, env={}, config_path=config)
    except SettingsError as exc:
        assert "\n" not in str(exc)
    else:
        assert s.refresh > 0


def test_service_and_version_labels_from_the_config_file(tmp_path: Path):
    config = tmp_path / "config.yaml"
    config.write_text("service_labels: [team.example.com/model, app]\nversion_labels: 'team.example.com/rev, version'\n")
    s = load_settings({}, env={}, config_path=config)
    assert s.service_labels == ("team.example.com/model", "app")
    assert s.version_labels == ("team.example.com/rev", "version")
    defaults = Settings()
    assert defaults.service_labels[0] == "app.kubernetes.io/name" and "llm-d.ai/model" in defaults.service_labels
    assert defaults.version_labels[0] == "app.kubernetes.io/version"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("service_labels: []\n", "service_labels: give at least one label name"),
        ("service_labels: ''\n", "service_labels: give at least one label name"),
        ("service_labels:\n", "service_labels: expected a list of label names"),
        ("service_labels: {a: b}\n", "service_labels: expected a list of label names"),
        ("version_labels: [1, 2]\n", "version_labels: expected a list of label names"),
        ("version_labels: ['has space']\n", "version_labels: 'has space' is not a valid label name"),
        ("version_labels: ['Example.com/x']\n", "'Example.com/x' is not a valid label name"),
        ("version_labels: ['/x']\n", "'/x' is not a valid label name"),
        ("version_labels: ['a/b/c']\n", "'a/b/c' is not a valid label name"),
        (f"version_labels: ['{'x' * 64}']\n", "is not a valid label name"),
        ('version_labels: ["bad\\nline"]\n', "is not a valid label name"),  # a real newline, still one line
    ],
)
def test_bad_label_lists_are_one_clear_line(tmp_path: Path, text: str, fragment: str):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    with pytest.raises(SettingsError) as err:
        load_settings({}, env={}, config_path=config)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_paths_under_home_are_shown_from_tilde(monkeypatch, tmp_path):
    from pathlib import Path

    from gputui.base.paths import shown

    monkeypatch.setenv("HOME", str(tmp_path))
    assert shown(tmp_path / ".local/state/gputui/audit.jsonl") == "~/.local/state/gputui/audit.jsonl"
    assert shown(Path("/var/log/gputui/audit.jsonl")) == "/var/log/gputui/audit.jsonl"
