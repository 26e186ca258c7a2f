"""The traffic shift's vocabulary: the plan and its parts (the router kinds are `gputui.vocabulary.router_kinds`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputui.backends.base import BackendError
from gputui.vocabulary.model import InferenceService
from gputui.vocabulary.router_kinds import HTTPROUTE_MAX_WEIGHT  # noqa: F401 - the traffic package's (its route scale's bound)

DEFAULT_SCALE = 100
ARGO_MANAGER = "rollouts-controller"  # the Argo Rollouts controller's field manager
ROLLOUT_ACTIONS = ("promote", "promote-full", "abort", "retry", "undo")
STEP_PCT = 10.0


class ShiftError(BackendError):
    """A shift that may not go ahead (validation, conflict), worded for one line."""


@dataclass(frozen=True, slots=True)
class Step:
    """Move one version's share by `delta` percentage points; the others rebalance."""

    version: str
    delta: float


Targets = Mapping[str, float | int | str] | Step


@dataclass(frozen=True, slots=True)
class Patch:
    """Exactly what goes to the apiserver."""

    group: str
    version: str
    plural: str
    namespace: str
    name: str
    patch_type: str  # merge | json
    body: Any
    subresource: str = ""

    @property
    def content_type(self) -> str:
        return {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}[self.patch_type]

    @property
    def path(self) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        tail = f"/{self.subresource}" if self.subresource else ""
        return f"{base}/namespaces/{self.namespace}/{self.plural}/{self.name}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group, "version": self.version, "plural": self.plural,
            "namespace": self.namespace, "name": self.name, "patch_type": self.patch_type,
            "subresource": self.subresource, "body": self.body,
        }

    def render(self, indent: int | None = 2) -> str:
        """The request as text: method and path, content type, body."""
        if isinstance(self.body, list) and indent is not None:
            # One operation per line reads best for a JSON patch.
            body = "[\n" + ",\n".join("  " + json.dumps(op, ensure_ascii=False) for op in self.body) + "\n]"
        else:
            body = json.dumps(self.body, indent=indent, ensure_ascii=False)
        return f"PATCH {self.path}\nContent-Type: {self.content_type}\n{body}"


@dataclass(frozen=True, slots=True)
class VersionShift:
    name: str
    backend: str
    current_weight: int | None
    current_pct: float | None
    target_weight: int | None
    target_pct: float | None
    ready: int
    desired: int
    sessions: int | None

    @property
    def changes(self) -> bool:
        return self.target_weight is not None and self.target_weight != self.current_weight


@dataclass(frozen=True, slots=True)
class ShiftPlan:
    service: InferenceService
    kind: str
    action: str  # shift | promote | promote-full | abort | retry | undo
    group: str
    api_version: str
    plural: str
    object_name: str
    versions: tuple[VersionShift, ...]
    scale: int
    targets: Mapping[str, float]  # the resolved percentages, summing to 100
    errors: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()  # what --force overrides
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    patch: Patch | None = None  # None until built from the route object as read
    then: Patch | None = None  # a second PATCH, sent after the first (Argo's promote: status, then spec)
    route_read: bool = False  # current weights come from the route object, not the snapshot

    @property
    def service_key(self) -> str:
        return self.service.key

    @property
    def target(self) -> str:
        """The object written, as the audit log names it."""
        return f"{self.kind.lower()}/{self.service.namespace}/{self.object_name}"

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def changes(self) -> bool:
        return self.action != "shift" or any(v.changes for v in self.versions)

    def version(self, name: str) -> VersionShift | None:
        return next((v for v in self.versions if v.name == name), None)

    def summary(self) -> str:
        if self.action != "shift":
            return f"{self.action} of Rollout {self.service.namespace}/{self.object_name}"
        moves = [
            f"{v.name} {fmt_pct(v.current_pct)} → {fmt_pct(v.target_pct)}"
            for v in self.versions if v.changes
        ]
        return ", ".join(moves) if moves else "no change"

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service.key,
            "router": {"kind": self.kind, "group": self.group, "version": self.api_version,
                       "plural": self.plural, "namespace": self.service.namespace, "name": self.object_name},
            "action": self.action,
            "scale": self.scale,
            "versions": [
                {"name": v.name, "backend": v.backend, "current_weight": v.current_weight,
                 "current_pct": v.current_pct, "target_weight": v.target_weight, "target_pct": v.target_pct,
                 "ready": v.ready, "desired": v.desired, "sessions": v.sessions}
                for v in self.versions
            ],
            "errors": list(self.errors),
            "blockers": list(self.blockers),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "patch": self.patch.to_dict() if self.patch else None,
            "then": self.then.to_dict() if self.then else None,
        }


def fmt_pct(pct: float | None) -> str:
    if pct is None:
        return "–"
    return f"{pct:.0f}%" if abs(pct - round(pct)) < 0.05 else f"{pct:.1f}%"
