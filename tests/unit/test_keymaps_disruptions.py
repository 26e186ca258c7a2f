"""`:disruptions` is a keymap scope (issue 40): its keys are in the generated table, and a keymap that gives one of
them to another action is told of the clash on that screen, as on every other screen."""

from __future__ import annotations

from gputui.ui.keys.keymap_table import SCOPES
from gputui.ui.keys.keymaps import clashes


def test_the_disruptions_screen_is_a_scope_with_its_table_keys():
    own = SCOPES["disruptions"]
    assert own["back"] == "escape"
    assert own["select"] == "enter" and own["cursor-down"] == "down,j"  # the KeyTable's, focused on the screen


def test_a_keymap_clash_on_the_disruptions_screen_is_reported():
    found = clashes({"help": "question_mark,escape"})
    assert "escape is both back and help on the disruptions screen" in found
    # a keymap that clashes nowhere there says nothing of it
    assert not [c for c in clashes({"help": "question_mark,F"}) if "disruptions" in c]
