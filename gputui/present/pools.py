"""Pools in one line, for the dashboard (seed 000 §7: the idle rate watched where the operator looks): each
pool's GPUs allocated of offered, its allocated-but-idle ones when any, then the fleet's idle figure, or why
it is unknown. Cut to the width with the count of pools left out, never mid-figure."""

from __future__ import annotations

from rich.text import Text

from gputui.pools import FLEET, NO_POOL, PoolRow, idle_why
from gputui.present.cells import Palette


def pool_strip(rows: list[PoolRow], width: int, palette: Palette, why_unknown: str = "") -> Text:
    pools = [r for r in rows if r.pool != FLEET]
    fleet = next(r for r in rows if r.pool == FLEET)
    # The fleet's allocated GPUs idle over the last hour (below 5%): "idle 3/99".
    tail = Text("  idle ", style="dim")
    if fleet.idle is None:
        tail.append("?", style="bold")
        why = idle_why(fleet, why_unknown)
        if why:
            tail.append(f" ({why})", style="dim")
    else:
        tail.append(f"{fleet.idle}", style=f"bold {palette.cordoned}" if fleet.idle else "")
        tail.append(f"/{fleet.allocated}")
    line = Text(" Pools", style="bold")
    for i, r in enumerate(pools):
        part = Text(f"  {r.pool} ")
        part.append(r.use.text(short=True), style="bold")  # whole cards; "+": other schemes too (:pools)
        if r.idle:
            part.append(f", {r.idle} idle", style=palette.cordoned)  # a comma: "64+ 1 idle" read as "+1"
        more = Text(f"  +{len(pools) - i} (:pools)", style="dim")
        # The pool goes in only if what follows it (the rest counted, the fleet's idle) still fits.
        room = width - len(line) - len(part) - len(tail)
        if room < (len(more) if i < len(pools) - 1 else 0):
            line.append_text(more)
            break
        line.append_text(part)
    line.append_text(tail)
    line.truncate(width, overflow="ellipsis")
    return line


def has_pools(rows: list[PoolRow]) -> bool:
    """Worth a line: the nodes carry a pool label (one unlabelled pool says nothing the header does not)."""
    return any(r.pool not in (FLEET, NO_POOL) for r in rows)
