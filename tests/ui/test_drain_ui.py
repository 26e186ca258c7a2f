import json

from gputui.model import DRAIN_PHASE_ANNOTATION
from gputui.ui.drain_screens import DrainPlanScreen, DrainProgressScreen
from tests.ui.conftest import wait_for
from tests.ui.test_dashboard import loaded, rows


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
        session = app.drain_session
        # The demo clock is hand-moved: let sessions run down while the drain polls.
        for _ in range(120):
            app.test_clock.advance(2)
            await pilot.pause(0.05)
            if session.finished:
                break
        assert session.finished
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.snapshot.node(node).annotations.get(DRAIN_PHASE_ANNOTATION) == "done")
        assert not [p for p in app.snapshot.pods_on(node) if p.owner_kind != "DaemonSet" and not p.deleting]
    actions = [json.loads(l)["action"] for l in (tmp_path / "audit.jsonl").read_text().splitlines()]
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
        app.drain_session.controls[job_node].abort(uncordon=True)
        for _ in range(50):
            app.test_clock.advance(1)
            await pilot.pause(0.05)
            if app.drain_session.finished:
                break
        assert app.drain_session.finished


async def test_read_only_cannot_drain(app_factory):
    app = app_factory(read_only=True)
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        assert app.screen.check_action("drain", ()) is None
        await pilot.press("r")
        assert not isinstance(app.screen, DrainPlanScreen)


async def test_mark_nodes_for_a_batch(app_factory):
    app = app_factory()
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(pilot)
        first, second = rows(app)[:2]
        await pilot.press("space", "space")
        assert app.screen.marked == {first, second}
        await pilot.press("r")
        assert isinstance(app.screen, DrainPlanScreen) and app.screen.nodes == sorted([first, second])
