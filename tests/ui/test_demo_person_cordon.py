"""The demo's person's cordon (issue 40 item 6): gpu-a100-06 carries a gputui cordon record by another user than the
demo's own, with a reason, a ticket and an expiry passed; the dashboard counts it as a problem (cordon expired)
and `u` on it asks first, naming that user, and takes `y` only."""

from __future__ import annotations

from gputui.ui.screens.cordon_dialog import OverrideScreen
from tests.support.audit_lines import written
from tests.ui.pilot import loaded, wait_for

NODE = "gpu-a100-06"


async def test_the_persons_expired_cordon_is_a_problem_and_uncordon_names_the_user(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        problems = {p.node: p for p in app.problems()}
        assert problems[NODE].kind == "cordon expired"
        assert "priya@example.com" in problems[NODE].details() and "HW-4217" in problems[NODE].details()
        table = app.screen.nodes_table
        table.move_to(NODE)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, OverrideScreen))
        body = str(app.screen.query_one("#dialog-body").render())
        assert "Held by another actor: cordoned through gputui by another user: priya@example.com" in body
        await pilot.press("enter")  # not an override
        await pilot.pause()
        assert isinstance(app.screen, OverrideScreen) and app.snapshot.node(NODE).unschedulable
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.snapshot.node(NODE).unschedulable)
        # Uncordoned: no longer a problem (kept a minute as gone, as any problem that leaves: ProblemMemory).
        await wait_for(pilot, lambda: all(not p.present for p in app.problems() if p.node == NODE))
    [entry] = written(tmp_path / "audit.jsonl")
    assert (entry["action"], entry["target"], entry["result"]) == ("uncordon", f"node/{NODE}", "ok")
    assert [h["actor"] for h in entry["params"]["override_owner"]] == ["person"]
