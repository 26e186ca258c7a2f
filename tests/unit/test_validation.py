"""What a user types is checked before it is used: gates and durations, selectors, namespaces, contexts, Prometheus
URLs, config values and variables, YAML files; and every command exits as README's table says (0 done; 1 refused,
blocked or not done; 2 bad input, read-only, no cluster). Each case here was accepted silently, or crashed, before.

gputui runs in-process (main), under a throwaway HOME, with the TUI replaced by a stub that records its settings:
nothing here starts the TUI, a server or reaches a real cluster."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gputui.cli.main import main
from gputui.settings import SettingsError, load_settings

LLAMA = "llm/llama-3-70b-instruct"
NODE = "gpu-l40s-01"


@pytest.fixture
def gputui(tmp_path, monkeypatch, capsys):
    """gputui ARGV... in-process -> (exit code, stdout, stderr); `.started` holds the settings of each TUI stub."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / ".state"))
    for var in [v for v in os.environ if v.startswith("GPUTUI_") or v == "KUBECONFIG"]:
        monkeypatch.delenv(var)
    import gputui.ui.app as app

    started: list = []

    class StubApp:  # what tui.run reads of the app: its backend, and how it ended
        crash = None
        return_code = 0

        def __init__(self, settings, backend, *_args, **_kwargs):
            started.append(settings)
            self.backend = backend

        def run(self):
            return None

    monkeypatch.setattr(app, "GputuiApp", StubApp)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    run.started = started  # type: ignore[attr-defined]
    return run


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def unreachable(tmp_path) -> str:
    """A kubeconfig whose apiserver refuses every connection (contexts a and b)."""
    path = tmp_path / "unreachable.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{closed_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in ("a", "b")],
    }))
    return str(path)


def one_line(err: str, fragment: str = "") -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: error:"), err
    assert fragment in lines[0], lines[0]


# ----- gates and durations ------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag, value, fragment", [
    ("--error-x", "nan", "argument --error-x: 'nan' is not a finite number"),
    ("--error-x", "inf", "argument --error-x: 'inf' is not a finite number"),
    ("--error-x", "0", "argument --error-x: must be above 0"),
    ("--error-x", "-2", "argument --error-x: must be above 0"),
    ("--latency-x", "nan", "argument --latency-x: 'nan' is not a finite number"),
    ("--latency-x", "-inf", "argument --latency-x: '-inf' is not a finite number"),
    ("--latency-x", "1e999", "argument --latency-x: '1e999' is not a finite number"),
    ("--poll", "0", "argument --poll: must be at least 1s"),
    ("--poll", "0.01s", "argument --poll: must be at least 1s"),
    ("--hold", "0", "argument --hold: must be longer than 0"),
    ("--window", "0s", "argument --window: must be longer than 0"),
    ("--hold", "99999999999h", "argument --hold:"),
    ("--steps", "5,nan,50", "argument --steps:"),
    ("--steps", "50,25", "argument --steps: '50,25': give rising percentages"),
    ("--steps", "0,50", "argument --steps:"),
])
def test_a_gate_or_duration_that_would_switch_a_safety_off_is_bad_input(gputui, flag, value, fragment):
    code, out, err = gputui("rollout", "--demo", LLAMA, "v2", f"{flag}={value}", "--dry-run")
    assert code == 2 and out == ""
    one_line(err, fragment)


@pytest.mark.parametrize("argv, fragment", [
    (["drain", NODE, "--dry-run", "--session-deadline", "0"], "argument --session-deadline: must be longer than 0"),
    (["drain", NODE, "--dry-run", "--grace-period", "-5"], "argument --grace-period: must be -1 (each pod's own)"),
    (["drain", NODE, "--dry-run", "--parallel", "0"], "argument --parallel: must be between 1 and 1000"),
    (["drain", NODE, "--dry-run", "--session-threshold", "-1"], "argument --session-threshold: must be 0 or more"),
    (["pools", "--idle-window", "0"], "argument --idle-window: must be longer than 0"),
    (["pools", "--idle-below", "nan"], "argument --idle-below: 'nan' is not a finite number"),
    (["pools", "--idle-below", "0"], "argument --idle-below: must be above 0 and 100"),
    (["check", "--window", "0m"], "argument --window: must be longer than 0"),
    (["check", "--drill", NODE, "--drill-timeout", "0"], "argument --drill-timeout: must be longer than 0"),
    (["scale-down", LLAMA, "v1", "-1"], "argument REPLICAS: must be 0 or more"),
    (["scale-down", LLAMA, "v1", "1", "--threshold", "-3"], "argument --threshold: must be 0 or more"),
    (["--refresh", "nan"], "argument --refresh: 'nan' is not a finite number"),
    (["--refresh", "inf"], "argument --refresh: 'inf' is not a finite number"),
    (["--wallboard", "--rotate", "inf"], "argument --rotate: 'inf' is not a finite number"),
    (["nodes", "--dcgm-interval", "nan"], "argument --dcgm-interval: 'nan' is not a finite number"),
    (["nodes", "--seed", "1_000"], "argument --seed: '1_000' is not a whole number"),
])
def test_numbers_that_make_no_sense_are_one_line_naming_the_flag(gputui, argv, fragment):
    code, _, err = gputui("--demo", *argv)
    assert code == 2
    one_line(err, fragment)
    assert gputui.started == []


# ----- Prometheus URLs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["nodes"], ["check"], ["pools"], []])
@pytest.mark.parametrize("url, fragment", [
    ("http://[::1", "'http://[::1' is not a URL"),
    ("http://prom:99999", "is not a URL"),
    ("http://prom:port", "is not a URL"),
    ("ftp://prom", "is not an http:// or https:// URL"),
    ("prom:9090", "is not an http:// or https:// URL"),
    ("http://", "has no host"),
    ("http://a b", "holds spaces"),
])
def test_a_prometheus_url_urllib_cannot_read_is_refused_before_any_command_runs(gputui, unreachable, command, url,
                                                                                fragment):
    code, _, err = gputui(*command, "--kubeconfig", unreachable, "--prometheus", url)
    assert code == 2
    one_line(err, "argument --prometheus:")
    assert fragment in err
    assert gputui.started == []  # the TUI never started on it


# ----- namespaces, selectors, names ---------------------------------------------------------------------------

@pytest.mark.parametrize("ns", ["../..", "kube-system/../x", "UPPER", "-lead", "a" * 64, "a b", "", "ns%2f.."])
def test_a_namespace_is_a_dns_label_so_it_cannot_steer_api_paths(gputui, ns):
    code, _, err = gputui("--demo", "drain", NODE, "--dry-run", "-n", ns)
    assert code == 2
    one_line(err, "argument -n/--namespace:")


@pytest.mark.parametrize("selector, fragment", [
    ("app!=vllm", "only key=value requirements are supported here, not 'app!=vllm'"),
    ("app in (a,b)", "not 'app in (a,b)'"),
    ("!app", "not '!app'"),
    ("Bad Key=x", "expected =, ==, !=, in, notin, > or < after 'Bad', found 'Key'"),
    ("=x", "expected a label key"),
    ("a=b=c", "expected ',' between requirements"),
    ("a=b,", "expected a requirement after ','"),
    ("a=b,a=c", "a is given twice with different values"),
    ("x/y/z=1", "'x/y/z' has a bad prefix"),
    ("x-=1", "is not a label key"),
    ("a=" + "v" * 64, "is not a label value"),
])
def test_an_invalid_or_unsupported_drain_selector_is_refused_not_half_applied(gputui, selector, fragment):
    code, _, err = gputui("--demo", "drain", NODE, "--dry-run", "-l", selector)
    assert code == 2
    one_line(err, "argument -l/--selector:")
    assert fragment in err


def test_a_kubernetes_equality_selector_still_selects(gputui):
    code, out, err = gputui("--demo", "drain", NODE, "--dry-run", "-o", "json", "-l", "app.kubernetes.io/name == x, tier=gpu")
    assert code in (0, 1), err
    assert '"selector": {\n' in out and '"app.kubernetes.io/name": "x"' in out and '"tier": "gpu"' in out


@pytest.mark.parametrize("argv, fragment", [
    (["drain", "../gpu-1", "--dry-run"], "argument NODE:"),
    (["drain", "Gpu_1", "--dry-run"], "argument NODE:"),
    (["shift", "../x/y", "--to", "v1=50"], "argument SERVICE:"),
    (["shift", LLAMA, "--to", " =50"], "argument --to:"),
    (["check", "--drill", NODE, "--drill-pod", "no-namespace"], "argument --drill-pod:"),
])
def test_names_that_reach_api_paths_are_checked(gputui, argv, fragment):
    code, _, err = gputui("--demo", *argv)
    assert code == 2
    one_line(err, fragment)


@pytest.mark.parametrize("argv, fragment", [
    (["pools", "--idle-window=--"], "argument --idle-window: expected one argument"),
    (["rules", "--host-label=--"], "argument --host-label: expected one argument"),
    (["shift", LLAMA, "--to=--"], "argument --to: expected one argument"),
    (["nodes", "--kubeconfig", "k" * 300], "argument --kubeconfig: 'kkkk"),
    (["nodes", "--config", "c" * 300], "argument --config: 'cccc"),
])
def test_what_the_fuzzer_found_in_argparse_and_paths_is_one_line(gputui, argv, fragment):
    """scripts/fuzz-cli.py found these: argparse strips '--' from `--flag=--` and hands over [] without calling the
    flag's type (a list reached the code: exit 70, a crash); a path longer than the file system takes made
    os.stat raise where a missing file was expected."""
    code, _, err = gputui("--demo", *argv)
    assert code == 2
    one_line(err, fragment)


# ----- contexts -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["drain", NODE, "--dry-run"], ["services"], ["versions"], ["pools"], ["check"],
                                     ["shift", LLAMA, "--to", "v2=20", "--dry-run"], ["scale-down", LLAMA, "v1", "1"],
                                     ["rollout", LLAMA, "v2", "--dry-run"]])
def test_a_command_on_one_cluster_refuses_a_fleet_instead_of_acting_on_the_first(gputui, command):
    code, out, err = gputui("--demo", *command, "--context", "a,b")
    assert code == 2 and out == ""
    one_line(err, f"--context a,b: gputui {command[0]} acts on one cluster")


@pytest.mark.parametrize("value", [",", "a,", ",a", "a,,b", " , ", "a,a"])
def test_empty_or_repeated_context_names_are_refused_not_taken_for_the_current_context(gputui, value):
    code, _, err = gputui("--demo", "nodes", "--context", value)
    assert code == 2
    one_line(err, "argument --context:")


def test_a_fleet_still_reaches_the_commands_that_take_one(gputui):
    code, out, err = gputui("--demo", "nodes", "-o", "json", "--context", "a,b")
    assert code == 0, err
    assert '"cluster": "a"' in out and '"cluster": "b"' in out
    code, _, err = gputui("--demo", "--context", "a,b")
    assert code == 0, err
    assert gputui.started[-1].contexts == ("a", "b")


def test_a_fleet_from_the_config_needs_context_named_for_a_one_cluster_command(gputui, tmp_path):
    config = tmp_path / "fleet.yaml"
    config.write_text("contexts: [prod, staging]\n")
    code, _, err = gputui("--demo", "drain", NODE, "--dry-run", "--config", str(config))
    assert code == 2
    one_line(err, "contexts prod, staging (a fleet, from the config) and gputui drain acts on one cluster")
    code, _, err = gputui("--demo", "drain", NODE, "--dry-run", "--config", str(config), "--context", "prod")
    assert code in (0, 1), err


# ----- config values and variables ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    ("audit_log: {a: 1}\n", "audit_log: expected text, got dict"),
    ("audit_log: [x]\n", "audit_log: expected text, got list"),
    ("theme: 12\n", "theme: expected text, got int"),
    ("theme:\n", "theme: expected text, got NoneType"),
    ("kubeconfig: 2024-01-01\n", "kubeconfig: expected text, got date"),
    ("seed: 3.7\n", "seed: 3.7 is not a whole number"),
    ("seed: true\n", "seed: True is not a whole number"),
    ("refresh: true\n", "refresh: True is not a number"),
    ("read_only: [1]\n", "read_only: [1] is not true or false"),
    ("engine_shutdown: .nan\n", "engine_shutdown: nan is not a finite number"),
    ("session_deadline: .inf\n", "session_deadline: inf is not a finite number"),
    ("wallboard_rotate: -.inf\n", "wallboard_rotate: -inf is not a finite number"),
    ("drain_parallel: 2.5\n", "drain_parallel: 2.5 is not a whole number"),
    ("temp_threshold: 1e400\n", "is not a finite number"),
    ("1: 2\n", "setting names are text, got 1"),
    ("namespace: ../..\n", "namespace: '../..' is not a namespace"),
    ("prometheus: 'http://[::1'\n", "prometheus: 'http://[::1' is not a URL"),
    ("prometheus: file:///etc/passwd\n", "is not an http:// or https:// URL"),
    ("host_label: 'Hostname) or vector(1'\n", "host_label: 'Hostname) or vector(1' is not a Prometheus label name"),
    ("prometheus_headers: {X-Scope-OrgID: \"a\\r\\nX-Evil: 1\"}\n", "prometheus_headers: X-Scope-OrgID: the value must be text on one line"),
    ("prometheus_headers: {'a b': c}\n", "'a b' is not an HTTP header name"),
    ("prometheus_headers: [a]\n", "prometheus_headers: expected a mapping"),
    ("context: ','\n", "context: ',' has an empty context name"),
    ("contexts: ['', prod]\n", "contexts: ',prod' has an empty context name"),
])
def test_a_config_value_of_the_wrong_type_is_one_line_naming_the_key(tmp_path, text, fragment):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    with pytest.raises(SettingsError) as err:
        load_settings({}, env={}, config_path=config)
    assert fragment in str(err.value) and str(config) in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("var, value, fragment", [
    ("GPUTUI_WALLBOARD_ROTATE", "inf", "GPUTUI_WALLBOARD_ROTATE: wallboard_rotate: 'inf' is not a finite number"),
    ("GPUTUI_REFRESH", "nan", "GPUTUI_REFRESH: refresh: 'nan' is not a finite number"),
    ("GPUTUI_TEMP_THRESHOLD", "hot", "GPUTUI_TEMP_THRESHOLD: temp_threshold: 'hot' is not a number"),
    ("GPUTUI_DCGM_INTERVAL", "1_0", "GPUTUI_DCGM_INTERVAL: dcgm_interval: '1_0' is not a number"),
    ("GPUTUI_PROMETHEUS", "http://[::1", "GPUTUI_PROMETHEUS: prometheus: 'http://[::1' is not a URL"),
    ("GPUTUI_HOST_LABEL", "a b", "GPUTUI_HOST_LABEL: host_label: 'a b' is not a Prometheus label name"),
    ("GPUTUI_READ_ONLY", "maybe", "GPUTUI_READ_ONLY: read_only: 'maybe' is not true or false"),
    ("GPUTUI_AUDIT_LOG", "a\x1b[2Jb", "GPUTUI_AUDIT_LOG: audit_log:"),
])
def test_an_environment_variable_is_checked_as_the_config_is_and_named(tmp_path, var, value, fragment):
    with pytest.raises(SettingsError) as err:
        load_settings({}, env={var: value}, config_path=tmp_path / "none.yaml")
    assert fragment in str(err.value)


@pytest.mark.parametrize("text, fragment", [
    ("drain_parallel: 99999999\n", "drain_parallel must be at most 1000"),
    ("wallboard_rotate: 1e300\n", "wallboard_rotate must be at most 86400"),
    ("session_deadline: 1e12\n", "session_deadline must be at most"),
])
def test_a_config_value_past_any_sense_is_refused(tmp_path, text, fragment):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    with pytest.raises(SettingsError, match=fragment):
        load_settings({}, env={}, config_path=config)


def test_good_config_values_still_load(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("namespace: llm\nprometheus: https://[::1]:9090/prom\nhost_label: hostname\nseed: 11\n"
                      "prometheus_headers: {X-Scope-OrgID: team-a}\ncontexts: [prod-eu, prod-us]\naudit_log: ''\n"
                      "read_only: yes\nrefresh: 2.5\n")
    s = load_settings({}, env={}, config_path=config)
    assert (s.namespace, s.prometheus, s.host_label, s.seed) == ("llm", "https://[::1]:9090/prom", "hostname", 11)
    assert dict(s.prometheus_headers) == {"X-Scope-OrgID": "team-a"} and s.contexts == ("prod-eu", "prod-us")
    assert s.audit_log is None and s.read_only is True and s.refresh == 2.5


# ----- YAML: aliases, depth, size -----------------------------------------------------------------------------

LAUGHS = ('lol: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
          + "".join(f"l{i}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n" for i in range(8)))


def test_billion_laughs_in_a_theme_keymap_or_config_is_refused_at_once(tmp_path, monkeypatch):
    """At once: before anything is built (the loader is never called), at the line whose alias passed the bound
    (line 5 of a theme, the third list of laughs), not after counting the rest of the document."""
    from gputui.base.yaml_file import load_mapping
    from gputui.ui.keys.keymaps import parse_keymap
    from gputui.ui.theming import parse_theme

    built: list[str] = []
    load = yaml.load
    monkeypatch.setattr(yaml, "load", lambda text, *a, **kw: built.append(text) or load(text, *a, **kw))
    theme = tmp_path / "laughs.yaml"
    theme.write_text(f"name: laughs\n{LAUGHS}primary: *i\n")
    with pytest.raises(ValueError, match=r"^line 5: aliases expand to more than 5000 nodes$"):
        load_mapping(theme)
    with pytest.raises(ValueError, match=r"^line 5: aliases expand"):
        parse_theme(theme)
    keymap = tmp_path / "laughs-keys.yaml"
    keymap.write_text(f"name: laughs\n{LAUGHS}description: *i\n")
    with pytest.raises(ValueError, match=r"^line 5: aliases expand"):
        parse_keymap(keymap)
    config = tmp_path / "config.yaml"
    config.write_text(f"{LAUGHS}theme: *i\n")
    with pytest.raises(SettingsError, match=r"config\.yaml: line 4: aliases expand"):
        load_settings({}, env={}, config_path=config)
    assert built == []
    fine = tmp_path / "fine.yaml"
    fine.write_text("name: fine\n")
    assert load_mapping(fine) == {"name": "fine"} and built == ["name: fine\n"]  # the spy sees what is built


def test_a_little_aliasing_is_still_allowed(tmp_path):
    from gputui.ui.theming import parse_theme

    theme = tmp_path / "mine.yaml"
    theme.write_text("name: mine\nprimary: &p '#00aaff'\naccent: *p\nvariables: {}\n")
    assert parse_theme(theme).accent == "#00aaff"


def test_a_recursive_alias_is_refused(tmp_path):
    from gputui.base.yaml_file import load_mapping

    path = tmp_path / "loop.yaml"
    path.write_text("name: loop\nprimary: &a [*a]\n")
    with pytest.raises(ValueError, match=r"line 2: alias \*a refers to a node that contains it"):
        load_mapping(path)


def test_deep_nesting_is_refused_not_a_crash_of_libyaml(tmp_path):
    """libyaml's composer recursed once per level: 200,000 '[' killed the process (SIGSEGV). In a child process,
    so that the old code's crash fails this test instead of ending the run."""
    path = tmp_path / "deep.yaml"
    path.write_text("name: deep\nprimary: " + "[" * 200_000 + "]" * 200_000 + "\n")
    code = ("import sys; from pathlib import Path; from gputui.base.yaml_file import load_mapping\n"
            "try:\n    load_mapping(Path(sys.argv[1]))\nexcept ValueError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-500:]
    # Our bound, or (PyYAML 6.0.4's libyaml, which counts depth while scanning ahead) libyaml's own: one line.
    assert re.fullmatch(r"line 2: (nested deeper than 64 levels|not valid YAML \(exceeded maximum nesting depth\))",
                        done.stdout.strip()), done.stdout


def test_a_file_over_a_megabyte_is_refused_unread(tmp_path):
    from gputui.ui.theming import parse_theme

    path = tmp_path / "huge.yaml"
    path.write_text("name: huge\nprimary: '#000000'\n" + "# padding\n" * 120_000)
    with pytest.raises(ValueError, match="larger than 1 MB"):
        parse_theme(path)


@pytest.mark.parametrize("text, fragment", [
    ("refresh: 2001-13-45\n", "not valid YAML (month must be in 1..12)"),
    ("refresh: " + "1" * 5000 + "\n", "not valid YAML (Exceeds the limit"),
])
def test_a_value_the_yaml_loader_cannot_build_is_one_line_not_a_traceback(gputui, tmp_path, text, fragment):
    config = tmp_path / ".config" / "gputui"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text(text)
    code, _, err = gputui("--demo", "nodes")
    assert code == 2
    one_line(err, fragment)


# ----- exit codes as README's table says ----------------------------------------------------------------------

@pytest.mark.parametrize("argv, code, fragment", [
    (["scale-down", "no-such-model", "v1", "1"], 2, 'service "no-such-model" not found'),
    (["scale-down", LLAMA, "v9", "1"], 2, 'has no version "v9"'),
    (["scale-down", LLAMA, "v1", "99"], 2, "scale down to 0.."),
    (["shift", LLAMA, "--to", "v9=20"], 2, 'no version "v9"'),
    (["shift", LLAMA, "--to", "v1=50", "--to", "v1=60", "--force", "--dry-run"], 2, "--to names v1 more than once"),
    (["shift", LLAMA, "--to", "v1=50", "--to", "v2=20"], 2, "targets add up to 70%, not 100%"),
    (["rollout", "no-such-model", "v2", "--dry-run"], 2, 'service "no-such-model" not found'),
    (["rollout", LLAMA, "v9", "--dry-run"], 2, 'has no version "v9"'),
    (["rollout", LLAMA, "v2", "--steps", "5", "--dry-run"], 2, "the first step must be above it"),
])
def test_bad_input_to_a_write_command_exits_2_as_readme_says(gputui, argv, code, fragment):
    got, _, err = gputui("--demo", *argv)
    assert got == code, err
    one_line(err, fragment)


@pytest.mark.parametrize("argv", [["nodes"], ["versions"], ["pools"], ["services"], ["check"],
                                  ["drain", NODE, "--dry-run"], ["drain", NODE],
                                  ["shift", LLAMA, "--to", "v2=20"], ["shift", LLAMA, "--to", "v2=20", "--dry-run"],
                                  ["scale-down", LLAMA, "v1", "1"], ["scale-down", LLAMA, "v1", "1", "--dry-run"],
                                  ["rollout", LLAMA, "v2"], ["rollout", LLAMA, "v2", "--dry-run"],
                                  ["check", "--drill", NODE]])
def test_no_cluster_to_reach_exits_2_for_every_command(gputui, unreachable, argv):
    code, _out, err = gputui(*argv, "--kubeconfig", unreachable)
    assert code == 2, err
    one_line(err)
