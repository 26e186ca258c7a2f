"""A table that renders only the rows on screen (Textual's Line API).

DataTable keeps every cell as a widget-side object and re-measures on update:
fine for hundreds of rows, too slow for a 10,000-node fleet refreshed every
two seconds. This table holds the rows as plain data; a refresh replaces the
data and repaints only the visible lines. The cursor follows its row's key,
not its position, so a refresh never moves the operator's selection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputui.ui.widgets.table_sync import same_row

PADDING = 1  # cells each side of a column (a gap of two between columns)


LINES_KEPT = 800  # painted lines kept: a few screens' worth, whatever the fleet's size


class VirtualTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    VirtualTable { background: $surface; color: $foreground; scrollbar-size-vertical: 1; }
    VirtualTable > .virtual-table--header { text-style: bold; background: $panel; }
    VirtualTable > .virtual-table--cursor { background: $primary 40%; }
    VirtualTable:focus > .virtual-table--cursor { background: $primary; color: $text; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"virtual-table--header", "virtual-table--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        # The ids are KeyTable's too: one keymap entry moves the cursor in every table.
        Binding("up,k", "cursor(-1)", "Up", id="cursor-up", show=False),
        Binding("down,j", "cursor(1)", "Down", id="cursor-down", show=False),
        Binding("pageup", "page(-1)", "Page up", id="page-up", show=False),
        Binding("pagedown", "page(1)", "Page down", id="page-down", show=False),
        Binding("home", "edge(0)", "First", id="first", show=False),
        Binding("end", "edge(1)", "Last", id="last", show=False),
        Binding("enter", "select", "Open", id="select", show=False, tooltip="Open the selected row"),
    ]

    cursor_row: reactive[int] = reactive(0, repaint=False)

    class RowSelected(Message):
        def __init__(self, table: VirtualTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> VirtualTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns: list[tuple[str, str, int]] = []  # key, label, width
        self.gap = 2 * PADDING  # blank cells between two columns; one before the first when 2, after the last
        self.keys: list[str] = []
        self._render_row: Callable[[str], Sequence[Text]] = lambda key: ()
        self._cells: dict[str, Sequence[Text]] = {}  # rows rendered since the last set_rows
        # Whose rows _cells holds (set_rows' cells_key): a filter keystroke or a sort keeps the rows of the
        # same snapshot, and only repaints lines, from _lines when already painted.
        self._cells_key: object = None
        self._lines: dict[tuple, Strip] = {}
        self._index: dict[str, int] | None = {}  # key -> row, built when first asked (move_to)
        self._held: dict[str, Sequence[Text]] | None = None  # show_rows' last rows
        self._paint: tuple[Style, Style, Style] | None = None  # base, header and cursor styles of one paint

    # ----- data -----------------------------------------------------------------

    def set_columns(self, columns: Sequence[tuple[str, str, int]], gap: int = 2 * PADDING) -> None:
        """`gap`: blank cells between two columns (2: one each side; 1: one between, none before the first).
        Either way one blank cell at least follows the last column, so the scrollbar never touches a cell."""
        self.columns = list(columns)
        self.gap = gap
        self._lines = {}
        self._resize()
        self.refresh()

    def set_rows(self, keys: Sequence[str], render_row: Callable[[str], Sequence[Text]],
                 cells_key: object = None) -> None:
        """Replace every row; cells are rendered only when their line is painted. `cells_key`: what the rows'
        cells depend on; when it equals the last call's, the cells (and painted lines) already made are kept.

        The cursor stays on the key it was on when that key remains.
        """
        selected = self.selected_key
        self._held = None
        keys = list(keys)
        self._render_row = render_row
        if cells_key is None or cells_key != self._cells_key:
            self._cells, self._lines = {}, {}
        elif keys == self.keys:  # the very rows already drawn: nothing to paint (a list of the same strings: 1 ms)
            return
        self.keys = keys
        self._cells_key = cells_key
        self._index = None  # a dict of 65,000 keys on every filter keystroke costs more than one look-up
        if selected is not None:
            with suppress(ValueError):  # filtered out: the cursor keeps its row number
                self.set_reactive(VirtualTable.cursor_row, self.keys.index(selected))
        self.set_reactive(VirtualTable.cursor_row, max(0, min(self.cursor_row, len(self.keys) - 1)))
        self._resize()
        self._scroll_cursor_into_view()
        self.refresh()

    def show_rows(self, rows: Mapping[str, Sequence[Text]]) -> bool:
        """A small table's every row, its cells made up front (key -> cells in column order): repainted only
        when a cell changed. True if one did."""
        held = self._held
        if held is not None and held.keys() == rows.keys() and all(
                same_row(held[key], cells) for key, cells in rows.items()):
            return False
        held, grew = dict(rows), len(rows) != len(self.keys)
        self.set_rows(list(held), held.__getitem__)
        self._held = held
        if grew:
            self.refresh(layout=True)  # a table of height auto takes the room its rows need
        return True

    @property
    def row_count(self) -> int:
        return len(self.keys)

    @property
    def selected_key(self) -> str | None:
        return self.keys[self.cursor_row] if 0 <= self.cursor_row < len(self.keys) else None

    def cells(self, key: str) -> Sequence[Text]:
        cells = self._cells.get(key)
        if cells is None:
            cells = self._cells[key] = self._render_row(key)
        return cells

    def move_to(self, key: str) -> None:
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.keys)}
        if key in self._index:
            self.cursor_row = self._index[key]

    def _resize(self) -> None:
        width = sum(w + self.gap for _, _, w in self.columns)
        self.virtual_size = Size(width, len(self.keys) + 1)

    # ----- navigation --------------------------------------------------------------

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()

    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_cursor_into_view(self) -> None:
        top = round(self.scroll_offset.y)
        rows = self._visible_rows()
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + rows:
            self.scroll_to(y=self.cursor_row - rows + 1, animate=False, immediate=True)

    def action_cursor(self, delta: int) -> None:
        if self.keys:
            self.cursor_row = max(0, min(len(self.keys) - 1, self.cursor_row + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * self._visible_rows())

    def action_edge(self, end: int) -> None:
        if self.keys:
            self.cursor_row = len(self.keys) - 1 if end else 0

    def action_select(self) -> None:
        if self.selected_key is not None:
            self.post_message(self.RowSelected(self, self.selected_key))

    # ----- rendering: only the lines asked for ------------------------------------------

    def _line(self, cells: Sequence[Text], style: Style) -> list[Segment]:
        segments: list[Segment] = []
        console = self.app.console
        lead = self.gap // 2  # before the first column
        between = Segment(" " * self.gap, style)
        if lead:
            segments.append(Segment(" " * lead, style))
        # Not strict: painting never raises; a row rendered before the columns changed shows what fits.
        for i, ((_, _, width), cell) in enumerate(zip(self.columns, cells, strict=False)):
            text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
            text.truncate(width, overflow="ellipsis", pad=True)
            if i:
                segments.append(between)
            # Text.render leaves out the Text's own base style: add it under the spans.
            own = console.get_style(text.style) if text.style else Style.null()
            segments.extend(Segment.apply_style(text.render(console), style + own))
        segments.append(Segment(" " * (self.gap - lead), style))
        return segments

    def _styles(self) -> tuple[Style, Style, Style]:
        return (self.rich_style, self.get_component_rich_style("virtual-table--header"),
                self.get_component_rich_style("virtual-table--cursor"))

    def render_lines(self, crop: Region) -> list[Strip]:
        # The styles are the same for every line of one paint: worked out per line (each walks the DOM for its
        # colours) they were a third of a paint's CPU.
        self._paint = self._styles()
        try:
            return super().render_lines(crop)
        finally:
            self._paint = None

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x = round(self.scroll_offset.x)
        base, header, cursor_style = self._paint or self._styles()
        painted: tuple  # what the line is kept under in _lines
        if y == 0:
            style = base + header
            painted = (None, width, scroll_x, style)  # the header line is kept as the rows' lines are
            strip = self._lines.get(painted)
            if strip is not None:
                return strip
            segments = self._line([Text(label) for _, label, _ in self.columns], style)
        else:
            index = round(self.scroll_offset.y) + y - 1
            if index >= len(self.keys):
                return Strip.blank(width, base)
            key, cursor = self.keys[index], index == self.cursor_row
            painted = (key, cursor, width, scroll_x, base, self.has_focus)
            strip = self._lines.get(painted)
            if strip is not None:
                return strip
            style = base
            if cursor:
                style = base + cursor_style
            segments = self._line(self.cells(key), style)
            if cursor:
                # The cursor row's colours win over the cells' own (green on blue is unreadable),
                # so it reads as one bar in every theme; the words still say the state.
                segments = list(Segment.apply_style(segments, post_style=Style(color=style.color, bgcolor=style.bgcolor)))
        strip = Strip(segments).crop(scroll_x, scroll_x + width).extend_cell_length(width, style)
        if len(self._lines) > LINES_KEPT:  # scrolled far: start again
            self._lines = {}
        self._lines[painted] = strip
        return strip
