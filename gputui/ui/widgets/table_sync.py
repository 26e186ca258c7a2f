"""Keep a DataTable in step with fresh rows by key: never clear and refill.

Clearing resets the cursor and the scroll position under the operator's
fingers; diffing keeps both and touches only the cells that changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

Cells = Sequence[Any]  # a row's cells in column order (a tuple of Text, usually)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.spans == b.spans and a.style == b.style
    return a == b


def same_row(a: Cells, b: Cells) -> bool:
    """Whether two rows would paint alike (Text's own == leaves out its style)."""
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))


def sync_rows(table: DataTable, rows: Mapping[str, Cells]) -> bool:
    """Make the table hold exactly `rows` (key -> cells in column order). True if anything changed."""
    changed = False
    columns = list(table.columns)
    for key in [k.value for k in table.rows if k.value is not None and k.value not in rows]:
        table.remove_row(key)
        changed = True
    for key, cells in rows.items():
        try:
            current = table.get_row(key)
        except RowDoesNotExist:
            table.add_row(*cells, key=key)
            changed = True
            continue
        # Not strict: a refresh never raises; a column the row lacks is simply not compared.
        for column, old, new in zip(columns, current, cells, strict=False):
            if not _same(old, new):
                table.update_cell(key, column, new)
                changed = True
    return changed
