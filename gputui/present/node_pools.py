"""Pools in one line, for the dashboard (seed 000 §7: the idle rate watched where the operator looks): each
pool's GPUs allocated of offered, its allocated-but-idle ones when any, then the fleet's idle figure, or why
it is unknown. Cut to the width with the count of pools left out, never mid-figure."""

from __future__ import annotations

from rich.text import Text

from gputui.policy.node_pools import FLEET, NO_POOL, PoolRow, idle_why
from gputui.present.cells import Palette


def pool_strip(rows: list[PoolRow], width: int, palette: Palette, why_unknown: str = "") -> Text:
    pools = [r for r in rows if r.pool != FLEET]
    fleet = next(r for r in rows if r.pool == FLEET)
    # Each pool's whole cards in use of offered (MIG slices, replicas and DRA devices are no cards: :pools and
    # the wide header count them); then the fleet's allocated GPUs idle over the last hour, labelled in as many
    # words as fit: "1 of 100 allocated GPUs idle for an hour", down to "idle 1h: 1/100".
    tails = [_tail(fleet, palette, why_unknown, form) for form in range(3)]
    line = Text(" Pools", style="bold")
    parts = []
    for r in pools:
        part = Text(f"  {r.pool} ")
        (_mark, used, offered), *_others = r.use.shown()
        part.append(f"{used}/{offered}", style="bold")
        if r.idle:
            part.append(f", {r.idle} idle", style=palette.cordoned)
        parts.append(part)
    everything = len(line) + sum(len(p) for p in parts)
    tail = next((t for t in tails if everything + len(t) <= width), tails[-1])
    for i, part in enumerate(parts):
        more = Text(f"  {len(pools) - i} more pools (:pools)", style="dim")
        # The pool goes in only if what follows it (the rest counted, the fleet's idle) still fits.
        room = width - len(line) - len(part) - len(tail)
        rest = sum(len(p) for p in parts[i + 1:])
        if room < (0 if rest <= room else len(more)):
            line.append_text(more)
            break
        line.append_text(part)
    line.append_text(tail)
    line.truncate(width, overflow="ellipsis")
    return line


def _tail(fleet: PoolRow, palette: Palette, why_unknown: str, form: int) -> Text:
    """The fleet's idle figure: form 0 in words, 1 shorter, 2 shortest."""
    if fleet.idle is None:
        tail = Text("  idle GPUs " if form < 2 else "  idle ", style="dim")
        tail.append("?", style="bold")
        why = idle_why(fleet, why_unknown)
        if why:
            tail.append(f" ({why})", style="dim")
        return tail
    style = f"bold {palette.cordoned}" if fleet.idle else ""
    if form == 0:
        tail = Text("  ")
        tail.append(str(fleet.idle), style=style)
        tail.append(f" of {fleet.allocated} allocated GPUs idle for an hour", style="dim")
    elif form == 1:
        tail = Text("  idle for 1h: ", style="dim")
        tail.append(str(fleet.idle), style=style)
        tail.append(f" of {fleet.allocated} allocated")
    else:
        tail = Text("  idle 1h: ", style="dim")
        tail.append(str(fleet.idle), style=style)
        tail.append(f"/{fleet.allocated}")
    return tail


def has_pools(rows: list[PoolRow]) -> bool:
    """Worth a line: the nodes carry a pool label (one unlabelled pool says nothing the header does not)."""
    return any(r.pool not in (FLEET, NO_POOL) for r in rows)
