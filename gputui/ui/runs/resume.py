"""Drains another gputui left unfinished (killed, SSH closed): said once per node when the dashboard sees
them, and resumed with `R`, each node to the deadline and options it was started with (its annotations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gputui.ops.drain.lease import foreign_holders
from gputui.ops.drain.options import DrainRecordError, resumable, saved_drain
from gputui.snapshot import ClusterSnapshot

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

Start = Callable[..., None]  # (nodes, options, deadlines, take_over=False): the dashboard starts the batch


def offer_resume(app: GputuiApp, snap: ClusterSnapshot, told: set[str]) -> None:
    new = [n for n in resumable(snap) if n not in told]
    if new:
        told.update(new)
        who = {n: node.annotations.get("gputui.io/drain-by", "someone") for n in new if (node := snap.node(n))}
        text = ", ".join(f"{n} (by {who.get(n, 'someone')})" for n in new)
        app.notify(f"Interrupted drain on {text}. Press R to resume it.", title="Drain", timeout=20)


def resume_drains(app: GputuiApp, start: Start) -> None:
    snap = app.snapshot
    nodes = resumable(snap) if snap else []
    if not nodes or snap is None:
        app.notify("No interrupted drain to resume.")
        return
    options, deadlines = {}, {}
    for n in nodes:  # each node to the end it was started for, with its own options
        node = snap.node(n)
        if node is None:
            continue
        try:
            options[n], deadline = saved_drain(node)
        except DrainRecordError as exc:
            app.notify(str(exc), severity="error", markup=False)
            return
        if deadline:
            deadlines[n] = deadline
    # `R` checked what every drain needs; a resumed requestor drain also withdraws its NodeMaintenance (abort,
    # uncordon), so its grants are checked too, before anything is written.
    why = app.backend.why_not_any(o.operation for o in options.values())
    if why:
        app.notify(why, severity="warning")
        return
    # A drain another gputui stopped renewing is taken over only when the operator says so.

    others = foreign_holders(snap, nodes, app.clock())
    if not others:
        start(nodes, options, deadlines)
        return
    from gputui.ui.screens.confirm import ConfirmScreen  # noqa: PLC0415 (screen: loaded when first shown)

    app.push_screen(ConfirmScreen(
        "Take over these drains?", "\n".join(others) + "\nTheir gputui stopped renewing its lease. Take them over?"),
        lambda yes: start(nodes, options, deadlines, take_over=True) if yes else None)
