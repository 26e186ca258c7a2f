"""Turning model facts into short, styled cells (Rich Text), shared by the TUI and headless output.

Every string that came from the cluster goes into a `Text` as data, never as
markup, so a label value like `[/]` is shown as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from math import isfinite

from rich.text import Text

from gputui.vocabulary.gpu_metrics import fmt_celsius, fmt_gib, fmt_pct, fmt_watts, known
from gputui.vocabulary.model import Node, NodeState

BLOCKS = " ▏▎▍▌▋▊▉█"
SPARKS = "▁▂▃▄▅▆▇█"
UNKNOWN_SPARK = "·"  # a sample that could not be read


HEAT_BANDS = (50.0, 85.0)  # percent: where mid and high begin, for every bar, cell and heat-map square


def heat_band(pct: float | None) -> int | None:
    """0 low, 1 mid, 2 high; None when the value is unknown (NaN included)."""
    if pct is None or not isfinite(pct):
        return None
    return 2 if pct >= HEAT_BANDS[1] else 1 if pct >= HEAT_BANDS[0] else 0


# Below this many columns the GPU figures take their short form: whole cards and a "+" when other schemes
# follow (the header, :pools, the wallboard's pools page), so the columns beside them stay on screen.
NARROW = 100


@dataclass(frozen=True, slots=True)
class Palette:
    """gputui's own colours; themes set them (Rich colour names or #rrggbb)."""

    heat_low: str = "#4caf50"
    heat_mid: str = "#e5c07b"
    heat_high: str = "#e06c75"
    ok: str = "#4caf50"
    cordoned: str = "#e5c07b"
    draining: str = "#c678dd"
    upgrading: str = "#61afef"
    alert: str = "#e06c75"
    drift: str = "#d19a66"
    stale: str = "#e06c75"
    muted: str = "#7f848e"

    def heat(self, pct: float | None) -> str:
        band = heat_band(pct)
        return self.muted if band is None else (self.heat_low, self.heat_mid, self.heat_high)[band]

    def state(self, state: NodeState) -> str:
        return {
            NodeState.READY: self.ok,
            NodeState.NOT_READY: self.alert,
            NodeState.CORDONED: self.cordoned,
            NodeState.DRAINING: self.draining,
            NodeState.UPGRADING: self.upgrading,
        }[state]


MONO = Palette(*([""] * 11))  # no colour: NO_COLOR, pipes


# One formatter per figure, shared with the CLI's tables: the cells' short names for gpu_metrics' own (and
# gpu_metrics.known, imported above: NaN and +-Inf are unknown, drawn as unknown, never as 0 or a full bar).
pct, gib, temp, power = fmt_pct, fmt_gib, fmt_celsius, fmt_watts


def bar(pct: float | None, width: int, style: str = "") -> Text:
    """A horizontal bar in eighths of a cell; a dim track where it is empty."""
    if width <= 0:
        return Text()
    pct = known(pct)
    if pct is None:
        return Text("·" * width, style="dim")
    eighths = round(max(0.0, min(100.0, pct)) / 100.0 * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (BLOCKS[part] if part else "")
    text = Text(filled, style=style)
    text.append("·" * (width - len(filled)), style="dim")
    return text


def mem_used_total(used: float | None, total: float | None) -> str:
    if known(used) is None and known(total) is None:
        return "–"
    return f"{gib(used)}/{gib(total)}G"


def short_model(product: str) -> str:
    """'NVIDIA-H100-80GB-HBM3' -> 'H100 80GB HBM3'."""
    name = product.removeprefix("NVIDIA-").removeprefix("NVIDIA ").replace("-", " ")
    return name or "?"


def sparkline(values: Sequence[float | None], width: int, top: float = 100.0) -> str:
    """The last `width` samples, each as one of eight block heights; an unknown sample (None, NaN) as a
    gap mark, never as the lowest block that would read as 0%."""
    if width <= 0:
        return ""
    if not values:
        return " " * width
    known = [v if v is not None and isfinite(v) else None for v in values]
    if len(known) > width:  # the highest of each bucket, so a spike is not lost in between
        size = len(known) / width
        buckets = [known[int(i * size): max(int((i + 1) * size), int(i * size) + 1)] for i in range(width)]
        known = [max((v for v in b if v is not None), default=None) for b in buckets]
    chars = [UNKNOWN_SPARK if v is None else SPARKS[min(7, max(0, int(v / top * 7.999)))] for v in known]
    return "".join(chars).rjust(width)


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def node_state_text(node: Node, palette: Palette) -> Text:
    return Text(node.state.value, style=palette.state(node.state))


_TEMPLATE_HASH = re.compile(r"^(.+)-[a-z0-9]{6,10}-([a-z0-9]{5})$")


def short_pod(key: str, width: int) -> str:
    """A pod as a narrow column shows it: without its namespace, and without its ReplicaSet's template hash
    (the same for every pod of a version), so what tells stable from canary, and one pod from the next,
    stays: `llm/mistral-7b-canary-62stqdt4m-7cz22` -> `mistral-7b-canary-7cz22`, then elided in the middle."""
    name = key.split("/", 1)[-1]
    m = _TEMPLATE_HASH.match(name)
    if m and len(name) > width:
        name = f"{m.group(1)}-{m.group(2)}"
    return elide_middle(name, width)


def elide_middle(name: str, width: int) -> str:
    """Keep both ends: pod names differ in their last characters."""
    if len(name) <= width or width < 5:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]
