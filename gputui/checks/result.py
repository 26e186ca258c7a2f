"""What a check says: its result, what it concerns, and the fix in one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

# The areas a check's id starts with (`check --only`'s choices). Here, not beside the rules, so that building
# the command line does not import every rule (a cost at every start, the TUI's too).
AREAS = ("nodes", "gpu", "versions", "metrics", "alerts", "pods", "services", "identity")


class Status(str, Enum):
    PASS = "pass"
    WARN = "warn"  # worth a look; not a failure
    FAIL = "fail"
    UNKNOWN = "unknown"  # what it needs could not be read: never counted as a pass


@dataclass(frozen=True, slots=True)
class CheckResult:
    id: str  # area.name, e.g. gpu.health
    seed: str  # where the checklist comes from, e.g. "001 §8"
    title: str
    status: Status
    summary: str  # one line: what was found
    objects: tuple[str, ...] = field(default=())  # what it concerns (nodes, namespace/pods, services)
    fix: str = ""  # one line, for anything but a pass

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


def exit_code(results: list[CheckResult], strict: bool = False) -> int:
    """0 when nothing fails, 1 when something does (with strict, an unknown counts as failing too)."""
    bad = {Status.FAIL, Status.UNKNOWN} if strict else {Status.FAIL}
    return 1 if any(r.status in bad for r in results) else 0
