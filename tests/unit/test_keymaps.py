"""Keymap files: the bundled ones are valid, default.yaml says what the code binds, bad files say why."""

from __future__ import annotations

import pytest

from gputui.ui.keys.keymaps import (
    bundled_keymap_dir,
    clashes,
    default_keys,
    load_keymaps,
    normalise,
    parse_keymap,
    resolve,
)


@pytest.fixture(autouse=True)
def no_user_files(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_bundled_keymaps_load_without_problems():
    keymaps, problems = load_keymaps()
    assert problems == []
    assert {"default", "vim", "k9s"} <= set(keymaps)


def test_default_yaml_lists_every_action_with_the_codes_keys():
    listed = parse_keymap(bundled_keymap_dir() / "default.yaml").keys
    code = default_keys()
    assert set(listed) == set(code)
    for action, keys in code.items():
        assert set(listed[action].split(",")) == set(keys.split(",")), action


def test_vim_changes_only_what_it_names():
    keymaps, _ = load_keymaps()
    changes = resolve("vim", keymaps)
    assert changes["first"] == "g,home" and changes["last"] == "G,end"
    assert "cordon" not in changes


def test_keys_are_normalised_to_textual_names():
    assert normalise("?,:,ctrl+d, G") == "question_mark,colon,ctrl+d,G"


@pytest.mark.parametrize("body, reason", [
    ("keys:\n  nope: x\n", "unknown action id 'nope'"),
    ("keys:\n  cordon: ctrl+banana\n", "cordon: unknown key 'ctrl+banana'"),
    ("keys:\n  cordon: []\n", "cordon: give keys as"),
    ("colour: red\n", "unknown keys colour"),
    ("- a\n- b\n", "expected a mapping"),
    ("keys: {cordon: [x\n", "not valid YAML"),
])
def test_bad_keymap_files_say_why(tmp_path, body, reason):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ValueError, match=None) as info:
        parse_keymap(path)
    assert reason in str(info.value)


def test_a_clash_the_keymap_makes_is_reported_but_not_the_codes_own():
    assert clashes({}) == []
    found = clashes({"cordon": "d"})
    assert found == ["d is both cordon and diagnostics on the dashboard screen",
                     "d is both cordon and diagnostics on the node screen"]


def test_extends_loops_and_missing_parents_are_problems(tmp_path, monkeypatch):
    folder = tmp_path / "config" / "gputui" / "keymaps"
    folder.mkdir(parents=True)
    (folder / "a.yaml").write_text("extends: b\nkeys: {cordon: z}\n")
    (folder / "b.yaml").write_text("extends: a\n")
    (folder / "orphan.yaml").write_text("extends: nowhere\n")
    keymaps, problems = load_keymaps()
    reasons = {p.path.rsplit("/", 1)[-1]: p.reason for p in problems}
    assert "loops back" in reasons["a.yaml"] and "loops back" in reasons["b.yaml"]
    assert reasons["orphan.yaml"] == "extends unknown keymap 'nowhere'"
    assert not {"a", "b", "orphan"} & set(keymaps)


def test_the_generated_binding_table_is_what_the_screens_bind():
    """keymap_table.py is written by scripts/default-keymap.py; run it after changing a binding."""
    from gputui.ui.keys.binding_scopes import app_table, scope_table
    from gputui.ui.keys.keymap_table import APP, SCOPES

    assert app_table() == APP and scope_table() == SCOPES


def test_loading_and_checking_keymaps_imports_no_screen():
    """The keymap layer reads the generated table: no import cycle with the screens, nothing slow at start."""
    import subprocess
    import sys

    code = ("import sys; from gputui.ui.keys.keymaps import load_keymaps, resolve; k, p = load_keymaps(); "
            "resolve('vim', k); print(sorted(m for m in sys.modules if m.startswith('gputui.ui.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["gputui.ui.keys", "gputui.ui.keys.keymap_table", "gputui.ui.keys.keymaps"]
