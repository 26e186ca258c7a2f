"""DataTable whose movement keys have binding ids, so keymaps (vim, k9s, the user's) can move them."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import DataTable


class KeyTable(DataTable, inherit_bindings=False):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", id="select", show=False),
        Binding("up,k", "cursor_up", "Up", id="cursor-up", show=False),
        Binding("down,j", "cursor_down", "Down", id="cursor-down", show=False),
        Binding("left", "cursor_left", "Left", id="cursor-left", show=False),
        Binding("right", "cursor_right", "Right", id="cursor-right", show=False),
        Binding("pageup", "page_up", "Page up", id="page-up", show=False),
        Binding("pagedown", "page_down", "Page down", id="page-down", show=False),
        Binding("home", "scroll_top", "First", id="first", show=False),
        Binding("end", "scroll_bottom", "Last", id="last", show=False),
    ]
