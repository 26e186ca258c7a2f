"""Node detail's fault counts against its pool (issue 37 item 2): read by a thread, one query for the whole fleet
(Backend.read_fault_window), at the first draw of a node and every READ_EVERY_S after; the node's lines for the
detail's header. A node-detail-only helper: the arithmetic and words are gputui.policy.fault_peers'."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message

from gputui.backends.base import Backend, error_line
from gputui.policy.fault_peers import DEFAULT_WINDOW_S, PeerCount, fleet_peers, own_lines
from gputui.present.cells import Palette
from gputui.snapshot import ClusterSnapshot

READ_EVERY_S = 300.0  # a day of series is read again every 5 minutes, not at every refresh
SHOWN = 4  # lines at most in the header: describe (`i`) lists them all


@dataclass
class FaultPeersRead(Message):
    """The node's fault counts against its pool, for the node named (the screen may show another by then)."""

    node: str
    peers: list[PeerCount]


def read_peers(backend: Backend, snapshot: ClusterSnapshot, node: str, keys: tuple[str, ...],
               window_s: float = DEFAULT_WINDOW_S) -> list[PeerCount]:
    """The node's counts (network: call from a thread); a failed read is unknown with its reason, never none."""
    try:
        window, why = backend.read_fault_window(window_s)
    except Exception as exc:  # noqa: BLE001 - whatever broke, the counts are unknown and say why
        window, why = None, error_line(exc)
    return fleet_peers(snapshot.nodes, window, why, keys, window_s, only=node).get(node, [])


def peer_text(peers: list[PeerCount] | None, width: int, palette: Palette) -> Text:
    """`≈ XID 45 ×37 in 24 h; pool median 0, next worst 2`: a line per kind the node has some of, or why the
    counts are unknown, wrapped to `width`; nothing for a node with none (describe, `i`, lists every kind against
    the pool, and what is not collected) and until read."""
    text = Text()
    if peers is None:
        return text
    shown = own_lines(peers)
    for line in shown[:SHOWN]:
        text.append("\n ≈ ", style=f"bold {palette.alert}")
        for i, part in enumerate(textwrap.wrap(line, max(10, width - 3))):
            text.append(part if i == 0 else f"\n   {part}", style=palette.alert)
    if len(shown) > SHOWN:
        text.append(f"\n   … {len(shown) - SHOWN} more: i (describe)", style="dim")
    return text
