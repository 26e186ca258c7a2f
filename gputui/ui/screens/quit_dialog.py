"""The question `q` asks while a drain or a guided canary runs: what quitting leaves behind (cordoned nodes to
resume, traffic where it is), then the app ends only on yes. With nothing running, q quits at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.ui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp


def ask_quit(app: GputuiApp) -> None:
    """Quit, or first ask when a drain or a guided canary would be interrupted."""
    draining = app.running_drains
    running = [k for k, c in app.canaries.items() if not c.finished]
    if not draining and not running:
        app.exit()
        return

    def answer(yes: bool | None) -> None:
        if yes:
            app.exit()

    said = []
    if draining:
        nodes = ", ".join(n for s in draining for n in s.nodes)
        them = 'it' if len(draining) == 1 else 'them'
        # The demo's cluster lives in this process: a restarted demo starts afresh, with nothing to resume.
        after = ("; the simulated cluster ends with gputui: a new gputui --demo starts afresh, with nothing "
                 "to resume" if app.backend.simulated else
                 "; the nodes stay cordoned and can be resumed with R from the next gputui")
        said.append(f"{'A drain' if len(draining) == 1 else f'{len(draining)} drains'} of {nodes} "
                    f"{'is' if len(draining) == 1 else 'are'} running. Quitting interrupts {them}{after}.")
    if running:
        said.append(f"A guided canary of {', '.join(running)} is running. Quitting stops it where it is: its "
                    "traffic stays as it is now.")
    app.push_screen(ConfirmScreen("Quit while draining?" if draining else
                                  "Quit during a canary?", "\n".join(said)), answer)
