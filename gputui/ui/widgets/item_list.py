"""A list of rows that wrap, with a cursor: for findings and audit entries, whose sentences must be read whole
at 80 columns (a DataTable row cannot wrap). Each row is a focusable widget, so the cursor is the focus,
Textual scrolls it into view, and `enter` hands the row's payload to the screen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.console import RenderableType
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static


class Item(Static, can_focus=True):
    DEFAULT_CSS = """
    Item { height: auto; }
    Item:focus { background: $primary 40%; }
    """

    def __init__(self, renderable: RenderableType, payload: Any) -> None:
        super().__init__(renderable)
        self.payload = payload


class ItemList(VerticalScroll, can_focus=False):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", id="cursor-up", show=False),
        Binding("down,j", "move(1)", "Down", id="cursor-down", show=False),
        Binding("home", "edge(0)", "First", id="first", show=False),
        Binding("end", "edge(1)", "Last", id="last", show=False),
        Binding("enter", "choose", "Open", id="select", tooltip="Open the selected row"),
    ]

    class Chosen(Message):
        """enter on a row: its payload."""

        def __init__(self, payload: Any) -> None:
            super().__init__()
            self.payload = payload

    def set_items(self, rows: Sequence[tuple[RenderableType, Any]]) -> None:
        """Replace the rows; the cursor stays on the same position (clamped)."""
        at = self.index
        self.remove_children()
        items = [Item(renderable, payload) for renderable, payload in rows]
        self.mount_all(items)
        if items:
            self.call_after_refresh(self._focus, max(0, min(at if at is not None else 0, len(items) - 1)))

    @property
    def items(self) -> list[Item]:
        return list(self.query_children(Item))

    @property
    def index(self) -> int | None:
        focused = self.screen.focused if self.is_attached else None
        items = self.items
        return items.index(focused) if isinstance(focused, Item) and focused in items else None

    @property
    def selected(self) -> Any:
        i = self.index
        return None if i is None else self.items[i].payload

    def _focus(self, i: int) -> None:
        items = self.items
        if 0 <= i < len(items):
            items[i].focus()
            items[i].scroll_visible(animate=False)

    def action_move(self, delta: int) -> None:
        i = self.index
        self._focus(0 if i is None else max(0, min(len(self.items) - 1, i + delta)))

    def action_edge(self, end: int) -> None:
        self._focus(len(self.items) - 1 if end else 0)

    def action_choose(self) -> None:
        if self.selected is not None:
            self.post_message(self.Chosen(self.selected))
