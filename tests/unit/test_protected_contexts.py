"""Contexts the config protects are read-only below the UI, as --read-only is: no writer at all."""

import subprocess
import sys

from gputui.backends.factory import build_backend
from gputui.settings import load_settings, protection


def test_patterns_match_by_name_or_shell_pattern(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("protected_contexts: ['prod-*', staging-eu]\n")
    settings = load_settings({}, env={}, config_path=config)
    assert settings.protected_contexts == ("prod-*", "staging-eu")
    assert protection(settings, "prod-us-east") == "prod-*"
    assert protection(settings, "staging-eu") == "staging-eu"
    assert protection(settings, "staging-us") == "" and protection(settings, "dev-prod-1") == ""
    config.write_text("protected_contexts: {prod: true}\n")
    done = subprocess.run([sys.executable, "-m", "gputui", "--demo", "nodes"], capture_output=True, text=True,
                          env={"GPUTUI_CONFIG": str(config), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "protected_contexts: expected a list of context names or patterns" in done.stderr


def test_a_protected_demo_has_no_writer_and_says_why(tmp_path):
    settings = load_settings({"demo": True}, env={"GPUTUI_PROTECTED_CONTEXTS": "demo"}, config_path=tmp_path / "none")
    backend = build_backend(settings)
    assert backend.writer is None and backend.protected == "demo"
    assert backend.why_not("cordon") == ("read-only: context demo is protected ('demo' in protected_contexts): "
                                         "cordon is unavailable")
    config = tmp_path / "config.yaml"
    config.write_text("protected_contexts: [demo]\n")
    done = subprocess.run([sys.executable, "-m", "gputui", "--demo", "drain", "gpu-h100-08"], capture_output=True,
                          text=True, env={"GPUTUI_CONFIG": str(config), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                          timeout=60)
    assert done.returncode == 2 and "context demo is protected" in done.stderr
