"""What a Textual app would write to the terminal, for tests that check no text from outside reaches it
raw (a headless app writes nothing, so the test renders the same update itself)."""

from __future__ import annotations

import asyncio

from textual.app import App

# Sequences a hostile string carries that a terminal acts on: an OSC title, BEL, a screen clear, 8-bit CSI.
HOSTILE_SEQUENCES = ("\x1b]0;", "\x07", "\x1b[2J", "\x9b")


def terminal_output(app: App) -> str:
    """The terminal sequence a full repaint of the app's screen would write now."""
    update = app.screen._compositor.render_update(full=True)
    return update.render_segments(app.console)


def assert_nothing_hostile(out: str) -> None:
    for raw in HOSTILE_SEQUENCES:
        assert raw not in out, f"{raw!r} reached the terminal"


async def until(pilot, predicate, timeout: float = 30.0) -> None:
    """Let the app work until `predicate()` holds; fail loudly when it never does."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition never became true")
        await pilot.pause(0.1)
