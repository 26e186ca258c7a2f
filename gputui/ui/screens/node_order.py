"""The dashboard's node order: the sort in force and whether the filter is in use (NodeView, the dashboard's
own; the app hands a copy to each poll, whose thread orders the snapshot by it), `s` and `S`, and which nodes
the filter's words match. Both are worked out once per snapshot and kept on
it (present/columns.node_order, present/node_filter.matching): at 65,000 nodes a keystroke must not redo them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gputui.present.columns import (
    NODE_COLUMNS,
    PROBLEMS_SORT,
    RowContext,
    compute_order,
    keep_order,
    order_key,
    row_context,
)
from gputui.present.node_filter import Matched, matching
from gputui.snapshot import ClusterSnapshot
from gputui.ui.base import ClusterScreen
from gputui.ui.messages import OrderWorkedOut
from gputui.vocabulary.model import Node


@dataclass(frozen=True)
class NodeView:
    """What the poll thread needs of the dashboard's view: the sort in force (NODE_COLUMNS index, reversed?) and
    whether the filter is open or narrows the table (then each snapshot comes with what a first keystroke tests).
    A value: the app reads it on the UI thread (app.dashboard_view) and passes it to the poll; the thread never
    reads the screen."""

    sort_index: int = PROBLEMS_SORT
    reverse: bool = False
    filtering: bool = False


class NodeOrder(ClusterScreen):
    """The dashboard screen's base: its node order and filter matches."""

    _matched: Matched | None = None  # the last filter keystroke's (present/node_filter.matching)
    view = NodeView()  # replaced whole (frozen): the poll thread is handed the value in force when it starts

    @property
    def sort_index(self) -> int:
        return self.view.sort_index

    @sort_index.setter
    def sort_index(self, index: int) -> None:
        self.view = replace(self.view, sort_index=index, reverse=False)

    @property
    def sort_reverse(self) -> bool:
        return self.view.reverse

    def _matching(self, snap: ClusterSnapshot, words: list[str], ctx: RowContext) -> dict[str, Node]:
        self._matched = matching(snap, words, ctx.temp_threshold, ctx.majority_driver, self._matched, ctx.flaps)
        return self._matched[2]

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(NODE_COLUMNS)  # each column's natural order first
        self.show_snapshot()
        # `s` cycles: the next column's order is worked out now, in a thread, and kept on the snapshot, so a
        # press that follows finds it (at 65,000 nodes an order costs some 200 ms of the UI thread). The thread
        # only works it out; the snapshot is on screen, so its memo is written here, on the UI thread, when the
        # answer comes (on_order_worked_out).
        snap, settings = self.app.snapshot, self.app.settings
        if snap is not None:
            ctx = row_context(snap, self.app.palette, settings.temp_threshold, settings.pool_labels)
            following = (self.sort_index + 1) % len(NODE_COLUMNS)
            snap.by_name()  # the index an incremental sort looks moved nodes up in: built here, read there

            def ahead() -> None:
                names = compute_order(ctx, following, False)
                self.post_message(OrderWorkedOut(snap, order_key(ctx, following, False), names))

            self.run_worker(ahead, thread=True, group="next-sort", exclusive=True, exit_on_error=False)

    def on_order_worked_out(self, message: OrderWorkedOut) -> None:
        keep_order(message.snapshot, message.sort, message.names)

    def action_reverse_sort(self) -> None:
        self.view = replace(self.view, reverse=not self.view.reverse)
        self.show_snapshot()

