"""What `gputui check` reads beyond a snapshot: GPU memory growth per pod over a window, the alert rules
the metrics store has loaded and which GPU fault series it holds (from the reader), and the grants gputui's identity holds but never needs
(from the writer). Each part is either read or unknown with the reason (never empty = fine): a backend
fills it, the rules judge it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_WINDOW_S = 30 * 60.0  # the span GPU memory must stay flat over (a loaded model's KV cache is preallocated)


@dataclass(frozen=True, slots=True)
class AlertRule:
    name: str
    group: str
    query: str
    state: str  # inactive, pending or firing (the rules API's words)
    health: str = "ok"  # ok, err or unknown: a rule in error can never fire
    error: str = ""
    firing: int = 0  # alerts of this rule firing now


@dataclass(frozen=True, slots=True)
class CheckFacts:
    window_s: float = DEFAULT_WINDOW_S
    # "namespace/pod" -> MiB of GPU memory gained over the window, for pods whose series span it
    memory_growth_mib: Mapping[str, float] | None = None
    memory_error: str = ""  # why memory_growth_mib is None ("" when it was read)
    alert_rules: tuple[AlertRule, ...] | None = None
    rules_error: str = ""  # why alert_rules is None
    # e.g. "read secrets" -> held; None: the access review failed. Empty: not probed (read-only asks nothing).
    beyond_needs: Mapping[str, bool | None] = field(default_factory=dict)
    # The GPU fault series the store holds (exporter_counters.SERIES) -> how many nodes serve each; a name absent is
    # not collected. None: not read, fault_fields_error says why ("" when no backend part reads it).
    fault_fields: Mapping[str, int] | None = None
    fault_fields_error: str = ""


UNREAD = CheckFacts(memory_error="not read", rules_error="not read", fault_fields_error="not read")
