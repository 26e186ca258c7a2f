import io
import time

from gputui.ui.screens.drain_plan import DrainPlanScreen
from gputui.ui.screens.drain_progress import DrainProgressScreen
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION
from tests.support.audit_lines import written
from tests.ui.pilot import loaded, rows, step_drain, wait_for


async def test_drain_plan_then_progress_then_done(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"l40s-01", "enter")
        node = rows(app)[0]
        await pilot.press("r")
        assert isinstance(app.screen, DrainPlanScreen)
        await pilot.press("escape")  # cancel: nothing written
        await pilot.pause()
        assert not app.snapshot.node(node).unschedulable
        await pilot.press("r", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainProgressScreen))
        drain = app.last_drain
        # The demo clock is hand-moved: let sessions run down while the drain polls (bge-large's budget lets one
        # pod out of rotation at a time, each trusted quiet 30 s after it left).
        await step_drain(pilot, drain, 3, lambda: drain.finished, most=300)
        assert drain.finished
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.snapshot.node(node).annotations.get(DRAIN_PHASE_ANNOTATION) == "done")
        assert not [p for p in app.snapshot.pods_on(node) if p.owner_kind != "DaemonSet" and not p.deleting]
    actions = [e["action"] for e in written(tmp_path / "audit.jsonl")]
    assert actions[:2] == ["lease", "cordon"] and "evict" in actions


async def test_drain_blocked_plan_cannot_start(app_factory):
    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        snap = app.snapshot
        job_node = next(n.name for n in snap.nodes if any(p.owner_kind == "Job" for p in snap.pods_on(n.name)))
        app.screen.nodes_table.move_to(job_node)
        await pilot.press("r")
        assert isinstance(app.screen, DrainPlanScreen)
        await pilot.press("enter")  # blocked by emptyDir: stays on the plan
        assert isinstance(app.screen, DrainPlanScreen)
        await pilot.press("e")  # delete-emptydir-data
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainProgressScreen))
        app.last_drain.controls[job_node].abort(uncordon=True)
        await step_drain(pilot, app.last_drain, 1, lambda: app.last_drain.finished, most=50)
        assert app.last_drain.finished


async def test_read_only_cannot_drain(app_factory):
    app = app_factory(read_only=True)
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        await pilot.pause()
        assert not isinstance(app.screen, DrainPlanScreen)
        assert any(str(n.message).startswith("read-only: drain") for n in app._notifications)


async def test_mark_nodes_for_a_batch(app_factory):
    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        first, second = rows(app)[:2]
        await pilot.press("space", "space")
        assert app.screen.marked == {first, second}
        await pilot.press("r")
        assert isinstance(app.screen, DrainPlanScreen) and app.screen.nodes == sorted([first, second])


async def _board(app, pilot, node_filter: str = "h100-01"):
    await loaded(pilot)
    await pilot.press("slash", *node_filter, "enter")
    await pilot.press("r", "enter")
    await wait_for(pilot, lambda: isinstance(app.screen, DrainProgressScreen))
    drain = app.last_drain
    await wait_for(pilot, lambda: any(r.state == "waiting" for r in drain.pods.values()))
    await wait_for(pilot, lambda: app.screen.query_one("#drain-pods").row_count == len(drain.pods))
    return drain


async def test_board_keys_that_cut_or_stop_ask_first_and_say_how_many(app_factory):
    """The bug: on the board `e` evicted a pod holding dozens of live sessions at once, and `a`/`U` acted
    without a word, while on the plan screen just before `e` was a harmless toggle."""
    from gputui.ui.screens.confirm import ConfirmScreen

    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        drain = await _board(app, pilot)
        board = app.screen
        key = next(k for k, r in drain.pods.items() if r.state == "waiting")
        board.query_one("#drain-pods").move_cursor(row=list(drain.pods).index(key))
        sessions = drain.pods[key].sessions
        await pilot.press("e")
        assert isinstance(app.screen, ConfirmScreen)
        assert f"{sessions} live sessions will be cut" in str(app.screen._body)
        await pilot.press("n")  # no: nothing happens
        await pilot.pause()
        assert not drain.controls[drain.pods[key].node]._evict_now
        for key_name, _uncordon in (("a", False), ("U", True)):
            await pilot.press(key_name)
            assert isinstance(app.screen, ConfirmScreen) and "No session is cut" in str(app.screen._body)
            await pilot.press("escape")
            await pilot.pause()
            assert not any(c.aborted for c in drain.controls.values())
        await pilot.press("a", "y")
        await step_drain(pilot, drain, 1, lambda: drain.finished, most=100)
        assert drain.finished and drain.aborted
        await wait_for(pilot, lambda: "ABORTED" in str(board.query_one("#drain-summary").render()))
        # A finished board stops counting and its actions are gone, not toasts about nothing.
        assert "running" not in str(board.query_one("#drain-summary").render())
        for action in ("evict_now", "extend", "abort"):
            assert board.check_action(action, ()) is False


async def test_board_shows_each_waiting_pods_deadline_and_what_comes_next(app_factory):
    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        drain = await _board(app, pilot)
        table = app.screen.query_one("#drain-pods")
        await wait_for(pilot, lambda: table.row_count and " in " in str(table.get_row_at(0)[4]))
        row = table.get_row_at(0)
        deadline, detail = str(row[4]), str(row[5])
        assert " in 15m" in deadline  # a clock time and a countdown
        # What comes next: evicted once empty, or at the deadline; out of rotation, since when and how soon.
        first = drain.pods[next(iter(drain.pods))]
        if first.out_since is None:
            assert "evicted at <= 0 sessions, or at the deadline" in detail, detail
        else:
            assert detail.startswith("out of rotation since ") and detail.endswith(
                ", then evicted (the deadline cuts what is left)"), detail
        app.last_drain.controls[next(iter(drain.controls))].abort()


async def test_a_context_switch_during_a_drain_leaves_the_drains_connection_open(app_factory):
    """The bug: `:ctx` closed the reader the drain used; the drain then saw no pods and called the node done.
    Now the drain keeps its backend until it ends, and only then closes it."""
    from gputui.backends.demo import demo_backend
    from gputui.settings import Settings
    from gputui.ui.messages import Connected

    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        drain = await _board(app, pilot)
        old = app.backend
        closed = []
        old.reader.close = lambda: closed.append(True)  # record instead of closing
        app.post_message(Connected("demo", Settings(demo=True), demo_backend(seed=3), None))
        await wait_for(pilot, lambda: app.backend is not old)
        assert app.backend is not old and drain.backend is old and closed == []
        for control in drain.controls.values():
            control.abort()
        await step_drain(pilot, drain, 1, lambda: drain.finished, most=100)
        assert drain.finished and closed == [True]  # closed by the drain, once it ended
        assert "interrupted" not in " ".join(drain.log)


async def test_board_shows_each_pod_out_of_rotation_and_puts_one_back_when_asked_first(app_factory):
    """Issue 33, item 5: per pod, out of rotation since when, and the time to empty; `b` asks, then puts the
    label back, and the drain leaves that pod in rotation."""
    from gputui.ui.screens.confirm import ConfirmScreen

    app = app_factory()
    async with app.run_test(size=(160, 45)) as pilot:
        drain = await _board(app, pilot)
        await wait_for(pilot, lambda: any(r.out_since and r.state == "waiting" for r in drain.pods.values()))
        key = next(k for k, r in drain.pods.items() if r.out_since and r.state == "waiting")
        row = drain.pods[key]
        table = app.screen.query_one("#drain-pods")
        table.move_cursor(row=list(drain.pods).index(key))
        since = time.strftime("%H:%M:%S", time.localtime(row.out_since))
        await wait_for(pilot, lambda: f"out of rotation since {since}; empty in " in str(table.get_row(key)[5]))
        await pilot.press("b")
        assert isinstance(app.screen, ConfirmScreen)
        assert "New sessions reach it again" in str(app.screen._body)
        await pilot.press("n")
        await pilot.pause()
        assert row.out_since is not None  # no: nothing changed
        await pilot.press("b", "y")
        await step_drain(pilot, drain, 1, lambda: row.out_since is None, most=20)
        assert row.out_since is None and row.rotation_note == "back in rotation (asked by the operator)"
        labels = next(p.labels for p in drain.backend.reader.snapshot().pods if p.key == key)
        assert labels.get("serving") == "true", labels
        # Left in rotation by this drain from now on: a few more polls do not take it out again.
        await step_drain(pilot, drain, 2, most=10)
        assert row.out_since is None
        for control in drain.controls.values():
            control.abort()


async def test_the_plan_screen_shows_the_arrival_rate_of_a_pod_no_label_can_take_out(app_factory):
    """Read off the UI thread, delivered by message: codellama (the demo's service without a serving label)."""
    app = app_factory()
    async with app.run_test(size=(160, 50)) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"a100-02", "enter")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, DrainPlanScreen))
        plan = app.screen
        await wait_for(pilot, lambda: plan.rates or plan.rates_failed)
        from rich.console import Console

        console = Console(width=150, record=True, file=io.StringIO())
        console.print(plan.query_one("#drain-plan").content)
        text = console.export_text()
        assert "new sessions keep arriving" in text and "new sessions/s" in text, text
        await pilot.press("escape")


async def test_m_chooses_the_maintenance_operator_and_the_plan_says_so(app_factory):
    """The demo reads NodeMaintenances (the operator is installed): the plan offers `m`; on, the plan names the
    request it would make and what the operator does; off again, gputui cordons."""
    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"l40s-01", "enter", "r")
        assert isinstance(app.screen, DrainPlanScreen)
        said = lambda: app.screen.query_one("#drain-options").render().plain  # noqa: E731
        assert "[m] via: cordon" in said() and app.screen.plans()[0].request is None
        await pilot.press("m")
        assert "[m] via: NodeMaintenance (the operator cordons)" in said()
        assert app.screen.options.maintenance_namespace == "default"
        request = app.screen.plans()[0].request
        assert request is not None and "NodeMaintenance default/gputui-gpu-l40s-01" in request.words()
        await pilot.press("m")
        assert "[m] via: cordon" in said() and app.screen.options.maintenance_namespace == ""
        await pilot.press("escape")


async def test_enter_on_a_plan_via_nodemaintenance_is_refused_when_the_identity_may_not_create_it(app_factory):
    """The plan is the one place a drain becomes a requestor drain (`m`): an identity whose access review denied
    `create nodemaintenances` is told so by name at enter, and nothing starts; via cordon, the same plan starts."""
    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        app.backend.permissions = {"nodemaintenance_create": False}
        app.backend.words = {"nodemaintenance_create": "create nodemaintenances (maintenance.nvidia.com) in namespace "
                                                        "default"}
        await pilot.press("slash", *"l40s-01", "enter", "r")
        plan = app.screen
        assert isinstance(plan, DrainPlanScreen)
        await pilot.press("m", "enter")
        await pilot.pause()
        assert app.screen is plan, "a refused requestor drain must not start"
        said = [n.message for n in app._notifications]
        assert any("your identity may not create nodemaintenances" in m and "drain via NodeMaintenance" in m
                   for m in said), said
        await pilot.press("m", "enter")
        await wait_for(pilot, lambda: app.screen is not plan)
