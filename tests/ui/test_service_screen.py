"""enter on a service: its screen (versions, pods, nodes, sessions, the gates' figures read in a worker, the
audit history), w from it to the shift dialog; a shift made shows in its history."""

from __future__ import annotations

from gputui.ui.service_screen import ServiceScreen
from gputui.ui.traffic_screen import TrafficShiftScreen
from tests.ui.pilot import loaded, wait_for

MISTRAL = "llm/mistral-7b"


def body_text(screen: ServiceScreen) -> str:
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(screen.query_one("#service-body").content)
    return console.export_text()


async def open_service(pilot, key: str = MISTRAL) -> ServiceScreen:
    """From the dashboard, as an operator does: tab to the services panel, down to the service, enter."""
    await loaded(pilot)
    await pilot.press("tab")
    table = pilot.app.screen.services_table
    for _ in range(10):
        if table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value.partition("@")[0] == key:
            break
        await pilot.press("down")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ServiceScreen))
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.signals is not None)
    await pilot.pause()
    return screen


async def test_enter_on_a_service_shows_it_in_full(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_service(pilot)
        assert screen.key == MISTRAL
        text = body_text(screen)
        assert "router VirtualService llm/mistral-7b" in text
        canary = next(line for line in text.splitlines() if line.startswith("canary"))
        assert "20%" in canary and "1/2" in canary and "0.20%" in canary  # share, ready pods, the gates' error ratio
        pods = [p for p in app.snapshot.pods if p.service == "mistral-7b"]
        assert pods and all(p.name in text and p.node in text for p in pods)
        assert "no shift, canary or scale-down of this service" in text


async def test_w_opens_the_shift_dialog_and_the_shift_shows_in_the_history(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_service(pilot)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, TrafficShiftScreen) and app.screen.plan is not None)
        await pilot.press("minus", "enter")  # the canary down 10 points: never blocked
        await wait_for(pilot, lambda: getattr(app.screen, "confirm_plan", None) is not None)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: "shift  canary=10 stable=90" in body_text(screen))
