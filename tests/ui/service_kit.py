"""A service's screen as the tests open and read it (shared by the service screen's and the canary dialog's tests)."""

from __future__ import annotations

from gputui.ui.screens.service import ServiceScreen
from tests.ui.pilot import loaded, wait_for

MISTRAL = "llm/mistral-7b"
LLAMA = "llm/llama-3-70b-instruct"


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


def weights(app, key: str = "") -> dict:
    service = app.backend.writer.snapshot().service(key or LLAMA)
    return {v.name: v.weight for v in service.versions}
