"""The TUI's cordon asks why (issue 40 item 2): reason required, ticket and expiry optional, a bad value one line in
the form and nothing sent, all by keyboard at 80x24; an uncordon of a node another actor holds names that actor
and takes `y` only (enter does not override), and the audit log names whom it overrode."""

from __future__ import annotations

from gputui.policy.cordon_record import read_record
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.cordon_dialog import CordonScreen, OverrideScreen
from tests.support.audit_lines import written
from tests.ui.pilot import loaded, rows, wait_for


async def typed(pilot, text: str) -> None:
    await pilot.press(*("space" if c == " " else c for c in text))


def error_line(app) -> str:
    return str(app.screen.query_one("#cordon-error").render())


async def test_cordon_asks_reason_ticket_expiry_refuses_bad_input_in_one_line_then_records(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        target = next(n for n in rows(app) if app.snapshot.node(n).state.value == "Ready")
        app.screen.nodes_table.move_to(target)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CordonScreen))
        screen = app.screen
        # Everything of the form is on the 80x24 screen: its three fields and its keys line.
        for widget_id in ("#cordon-reason", "#cordon-ticket", "#cordon-expires", "#dialog-keys"):
            region = screen.query_one(widget_id).region
            assert region.height >= 1 and region.bottom <= 24 and region.right <= 80, (widget_id, region)
        await pilot.press("enter")  # no reason: one line, nothing sent
        await pilot.pause()
        assert app.screen is screen and "a reason is required" in error_line(app)
        await typed(pilot, "bad fan on GPU 3")
        await pilot.press("tab")
        await typed(pilot, "OPS-12")
        await pilot.press("tab")
        await typed(pilot, "yesterday")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and "neither a duration" in error_line(app)
        assert "\n" not in error_line(app).strip()
        assert not app.snapshot.node(target).unschedulable
        await pilot.press(*["backspace"] * len("yesterday"))
        await typed(pilot, "4h")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.snapshot.node(target).unschedulable)
        record = read_record(app.snapshot.node(target).annotations)
        assert record is not None
        assert (record.by, record.reason, record.ticket) == ("tester", "bad fan on GPU 3", "OPS-12")
        assert record.expires is not None and record.since is not None and record.expires - record.since == 4 * 3600
        # Esc cancels a cordon and sends nothing.
        other = next(n for n in rows(app) if app.snapshot.node(n).state.value == "Ready" and n != target)
        app.screen.nodes_table.move_to(other)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CordonScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, CordonScreen))
        assert not app.snapshot.node(other).unschedulable
    entries = written(tmp_path / "audit.jsonl")
    assert [(e["action"], e["target"]) for e in entries] == [("cordon", f"node/{target}")]


async def test_uncordon_over_another_actor_names_it_and_takes_y_only(app_factory, tmp_path):
    app = app_factory()
    node = "gpu-l40s-03"  # the demo's node mid driver upgrade, cordoned by the GPU Operator
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        app.screen.nodes_table.move_to(node)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, OverrideScreen))
        body = str(app.screen.query_one("#dialog-body").render())
        assert "Held by another actor: the GPU Operator is upgrading its driver" in body
        await pilot.press("enter")  # not an override
        await pilot.pause()
        assert isinstance(app.screen, OverrideScreen) and app.snapshot.node(node).unschedulable
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.snapshot.node(node).unschedulable)
    [entry] = written(tmp_path / "audit.jsonl")
    assert (entry["action"], entry["target"], entry["result"]) == ("uncordon", f"node/{node}", "ok")
    assert [h["actor"] for h in entry["params"]["override_owner"]] == ["gpu-operator"]


async def test_uncordon_of_ones_own_cordon_is_the_plain_confirm(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        target = next(n for n in rows(app) if app.snapshot.node(n).state.value == "Ready")
        app.screen.nodes_table.move_to(target)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CordonScreen))
        await typed(pilot, "disk")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.snapshot.node(target).unschedulable)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert not isinstance(app.screen, OverrideScreen)
        assert "It was cordoned through gputui by tester: disk" in str(app.screen.query_one("#dialog-body").render())
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.snapshot.node(target).unschedulable)
        assert read_record(app.snapshot.node(target).annotations) is None


async def test_nvsentinels_hostile_message_is_named_made_safe_and_the_keys_stay_on_an_80x24_screen(app_factory):
    import json

    app = app_factory()
    node = "gpu-h100-02"
    event = [{"checkName": "GpuXidError", "message": "\x1b]0;pwned\x07XID 79 " + "fallen off the bus " * 80}]
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        writer = app.backend.writer
        writer.set_unschedulable(node, True)
        writer.annotate_node(node, {"quarantineHealthEvent": json.dumps(event),
                                    "quarantineHealthEventIsCordoned": "True"})
        app.poll_now()
        await wait_for(pilot, lambda: "quarantineHealthEvent" in app.snapshot.node(node).annotations)
        app.screen.nodes_table.move_to(node)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, OverrideScreen))
        body = str(app.screen.query_one("#dialog-body").render())
        assert "NVSentinel quarantined it: GpuXidError: ␛]0;pwned␇XID 79" in body and "\x1b" not in body
        keys = app.screen.query_one("#dialog-keys").region
        assert keys.height >= 1 and keys.bottom <= 24
        await pilot.press("n")
        await pilot.pause()
        assert app.snapshot.node(node).unschedulable
