"""The TUI's uncordon gate (issue 37 item 4), by keyboard at 80x24 on the demo: `u` on a node gputui cordoned offers
the DCGM diagnostic first (`d`); on a pass the node is uncordoned; on anything else it stays cordoned, the reason is
shown, and only `o` then `y` uncordons it, audited as an override. The demo's diagnostic is SIMULATED
(gputui/backends/demo/diag_jobs.py): a clean node passes; gpu-h100-07, a GPU off the bus, is unknown."""

from __future__ import annotations

from gputui.ui.screens.cordon_dialog import CordonScreen, DiagScreen, OverrideScreen, UncordonChoiceScreen
from tests.support.audit_lines import written
from tests.ui.pilot import loaded, wait_for


async def cordon(pilot, node: str, reason: str) -> None:
    app = pilot.app
    app.screen.nodes_table.move_to(node)
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, CordonScreen))
    await pilot.press(*("space" if c == " " else c for c in reason), "enter")
    await wait_for(pilot, lambda: app.snapshot.node(node).unschedulable)


def body(app) -> str:
    return str(app.screen.query_one("#dialog-body").render())


async def test_the_diagnostic_gates_the_uncordon_and_an_override_takes_two_keys(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        # A clean node: d runs the diagnostic; the pass uncordons it.
        await cordon(pilot, "gpu-h100-02", "fan")
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, UncordonChoiceScreen))
        keys = app.screen.query_one("#dialog-keys").region
        assert keys.bottom <= 24 and keys.right <= 80
        await pilot.press("enter")  # neither choice
        await pilot.pause()
        assert isinstance(app.screen, UncordonChoiceScreen)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiagScreen) and app.screen.run is not None)
        assert "PASS" in body(app) and "uncordoned" in body(app)
        await wait_for(pilot, lambda: not app.snapshot.node("gpu-h100-02").unschedulable)
        await pilot.press("escape")

        # gpu-h100-07 has a GPU off the bus: unknown, it stays cordoned; o asks again, enter is not a yes.
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DashboardScreen")
        await cordon(pilot, "gpu-h100-07", "XID 79")
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, UncordonChoiceScreen))
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiagScreen) and app.screen.run is not None)
        assert "UNKNOWN" in body(app) and "only 7 of its 8 GPUs" in body(app) and "stays cordoned" in body(app)
        assert app.snapshot.node("gpu-h100-07").unschedulable
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OverrideScreen))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, OverrideScreen) and app.snapshot.node("gpu-h100-07").unschedulable
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.snapshot.node("gpu-h100-07").unschedulable)
    entries = written(tmp_path / "audit.jsonl")
    diag = [(e["target"], e["result"], e["params"]["verdict"]) for e in entries if e["action"] == "diag"]
    assert diag == [("node/gpu-h100-02", "ok", "pass"), ("node/gpu-h100-07", "refused", "unknown"),
                    ("node/gpu-h100-07", "override", "unknown")]
    uncordons = [e for e in entries if e["action"] == "uncordon"]
    assert [(e["target"], e["params"]["diag"]["verdict"]) for e in uncordons] == [
        ("node/gpu-h100-02", "pass"), ("node/gpu-h100-07", "unknown")]
    assert uncordons[1]["params"]["diag"]["override_diag"] is True
    assert uncordons[1]["params"]["record_removed"]["diag"]["verdict"] == "unknown"
