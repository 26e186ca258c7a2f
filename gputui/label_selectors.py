"""Label selection as the API does it: equality (`matchLabels`, a Service's selector, a drain's `-l`) and set-based
requirements (`matchExpressions`). The one place every layer's matching comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str], *, empty_matches: bool) -> bool:
    """Equality label selection, the one matcher every layer uses. What an empty selector means differs by
    object, so each caller says: a Service or a workload's selector with no labels selects nothing; a
    drain's `-l` with no labels (kubectl's default) selects every pod."""
    if not selector:
        return empty_matches
    return all(labels.get(k) == v for k, v in selector.items())


@dataclass(frozen=True, slots=True)
class Requirement:
    """One of a label selector's matchExpressions, as the API evaluates it (apimachinery's labels package)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        return True  # the API refuses any other operator; were one to come, the budget is counted, not ignored
