"""Snapshot pictures: the sizes and themes every picture is taken at, and how one is taken (shared by the
snapshot test modules)."""

from __future__ import annotations

import pytest

from tests.ui.conftest import make_app

THEMES = ["gputui-dark", "gputui-light", "gputui-wallboard", "gputui-colorblind", "gputui-mono", "gputui-nord"]
SIZES = [(80, 24), (200, 50)]


def picture(snap_compare, run_before, size, theme: str = "gputui-dark", **settings) -> bool:
    return snap_compare(make_app(theme=theme, **settings), terminal_size=size, run_before=run_before)


each_size = pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
each_theme = pytest.mark.parametrize("theme", THEMES)
