"""The drain board at 80x24 (issue 35, item 9): a batch keeps a node column; pod names keep what tells one
version from another; a queued node says queued, not 0/0 pods; a pod gone shows no stale count; each log line
is one row, so the newest stays in sight; a finished board's escape no longer says the drain goes on."""

from __future__ import annotations

from gputui.ops.drain.events import EventKind as K
from gputui.ui.screens.drain_progress import DrainProgressScreen
from tests.ui.pilot import loaded, rows, step_drain, wait_for


async def test_a_batch_board_at_80x24_says_which_node_which_version_and_stays_in_its_rows(app_factory):
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        # the demo's two hot nodes, gpu-h100-04 (llama's v1 and v2) and gpu-h100-06 (qwen2-72b, thermally throttling):
        # "h100-0" listed the demo's GPU fault nodes first (issue 37 item 6)
        await pilot.press("slash", *"temp", "enter")
        first, second = sorted(rows(app)[:2])  # drained in this order, one at a time
        assert (first, second) == ("gpu-h100-04", "gpu-h100-06")
        await pilot.press("space", "space", "r", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainProgressScreen))
        board, drain = app.screen, app.last_drain
        table = board.query_one("#drain-pods")
        await wait_for(pilot, lambda: table.row_count and any(r.state is K.WAITING for r in drain.pods.values()))
        assert [str(c.label) for c in table.columns.values()][:2] == ["Node", "Pod"]
        cells = [[str(c) for c in table.get_row(k)] for k in drain.pods]
        assert all(row[0] == first.removeprefix("gpu-") for row in cells), cells
        versions = {row[1].rsplit("-", 2)[-2].lstrip("…") for row in cells}
        assert {"v1", "v2"} <= versions, cells  # llama's two versions, told apart in 17 columns
        bars = str(board.query_one("#drain-nodes").render())
        queued = next(line for line in bars.splitlines() if second in line)
        assert "queued" in queued and "0/0" not in queued, bars
        await step_drain(pilot, drain, 5, lambda: drain.finished, most=400)
        assert drain.finished
        await wait_for(pilot, lambda: "FINISHED" in str(board.query_one("#drain-summary").render()))
        log = str(board.query_one("#drain-log").render()).splitlines()
        assert len(log) <= 6 and all(len(line) <= 80 for line in log), log
        assert drain.log[-1][:40] in "\n".join(log)  # the last line in sight
        gone = [k for k, r in drain.pods.items() if r.state is K.GONE]
        assert gone and all(str(table.get_row(k)[3]).strip() == "–" for k in gone)
        assert board.check_action("app.pop_screen", ()) is False and board.check_action("back", ()) is True
