"""What pilot-driven tests share: waiting on a condition, the dashboard loaded, its rows."""

from __future__ import annotations

from gputui.ui.widgets.virtual_table import VirtualTable


async def wait_for(pilot, predicate, timeout: float = 15.0, what=None) -> None:  # a busy 2-core CI
    """Let the app work until the predicate holds; fail loudly when it never does (with `what()`, if given:
    the state that explains why)."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition never became true" + (f": {what()}" if what else ""))
        await pilot.pause(0.05)


async def step_drain(pilot, drain, seconds: float, until=None, most: int = 300) -> None:
    """Move the demo's clock `seconds` at a time until `until()` holds (failing after `most` steps), or `most`
    steps when no `until` is given. Each step waits for the drain to look again (`drain.looks` moves), so a
    slow machine never lets the clock run ahead of the drain: a deadline cannot pass between two of its looks
    because the test's loop outran its thread."""
    for _ in range(most):
        if until is not None and until():
            return
        looks = drain.looks
        pilot.app.test_clock.advance(seconds)
        await wait_for(pilot, lambda seen=looks: drain.looks > seen or drain.finished,
                       what=lambda seen=looks: f"the drain did not look again after {seen} looks")
    assert until is None or until(), f"not reached in {most} steps of {seconds:g} s"


async def loaded(pilot) -> None:
    """The dashboard shows the first snapshot: its node table has rows."""
    await wait_for(pilot, lambda: pilot.app.snapshot is not None and pilot.app.screen.query_one("#nodes").row_count > 0)
    await idle_read(pilot)


async def idle_read(pilot) -> None:
    """The idle GPUs a view asked for are read (in a worker): what is drawn next no longer waits on them."""
    await wait_for(pilot, lambda: not pilot.app.idle_watch.pending)
    await pilot.pause()


async def wallboard_loaded(pilot) -> None:
    """The wallboard shows the first snapshot."""
    from gputui.ui.screens.wallboard import WallboardScreen

    await wait_for(pilot, lambda: pilot.app.snapshot is not None and isinstance(pilot.app.screen, WallboardScreen))
    await pilot.pause()
    await idle_read(pilot)


def rows(app) -> list[str]:
    """The dashboard's node names, in the order shown."""
    return list(app.screen.query_one("#nodes", VirtualTable).keys)


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def command(pilot, text: str, *then: str) -> None:
    from gputui.ui.screens.command import CommandScreen

    await pilot.press("colon")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CommandScreen))
    await pilot.press(*text, *then)
    await pilot.pause()
