"""Argo Rollouts' own verbs, as `kubectl argo rollouts` sends them (read from its module,
pkg/kubectl-argo-rollouts/cmd/{promote,abort,retry,undo}, v1.8.3): merge patches on the Rollout's status
subresource first, then on its spec; undo is a JSON patch putting back the pod template of an earlier
revision's ReplicaSet. They depend on the Rollout as read now (its pause conditions, its step, whether it is
fully promoted already, its ReplicaSets), so they are built from the objects, never from the snapshot."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

REVISION = "rollout.argoproj.io/revision"  # on each ReplicaSet the controller makes
HASH_LABEL = "rollouts-pod-template-hash"  # the controller's own label in a ReplicaSet's template

# action -> (status patch, spec patch); None: that half is not sent.
Bodies = tuple[dict[str, Any] | None, dict[str, Any] | None]


def _steps(rollout: Mapping[str, Any]) -> list[Any] | None:
    canary = ((rollout.get("spec") or {}).get("strategy") or {}).get("canary")
    return None if canary is None else list(canary.get("steps") or [])


def _next_step(rollout: Mapping[str, Any], steps: list[Any]) -> int:
    index = int((rollout.get("status") or {}).get("currentStepIndex") or 0)
    return index + 1 if index < len(steps) else index


def bodies(action: str, rollout: Mapping[str, Any]) -> tuple[Bodies, str]:
    """The patches for `action` on this Rollout, and why nothing is sent when both are None."""
    spec, status = rollout.get("spec") or {}, rollout.get("status") or {}
    if action == "abort":
        return ({"status": {"abort": True}}, None), ""
    if action == "retry":
        return ({"status": {"abort": False}}, None), ""
    if action == "promote-full":
        if status.get("currentPodHash") and status.get("currentPodHash") == status.get("stableRS"):
            return (None, None), "the Rollout is fully promoted already (its current pods are its stable ones)"
        return ({"status": {"promoteFull": True}}, None), ""
    # promote: past the current pause or step
    spec_body = {"spec": {"paused": False}} if spec.get("paused") else None
    steps = _steps(rollout)
    analysis = ((status.get("canary") or {}).get("currentStepAnalysisRunStatus") or {}).get("status")
    if analysis == "Inconclusive" and status.get("pauseConditions") and status.get("controllerPause") and steps:
        # Without moving the step, a Rollout paused on an inconclusive analysis stays stuck.
        status_body: dict[str, Any] | None = {"status": {
            "pauseConditions": None, "controllerPause": False, "currentStepIndex": _next_step(rollout, steps)}}
    elif status.get("pauseConditions"):
        status_body = {"status": {"pauseConditions": None}}
    elif steps:  # a canary with steps, between pauses (e.g. running an analysis): the next step
        status_body = {"status": {"pauseConditions": None, "currentStepIndex": _next_step(rollout, steps)}}
    else:
        status_body = None
    if status_body is None and spec_body is None:
        return (None, None), "nothing to promote: the Rollout is neither paused nor on a canary step"
    return (status_body, spec_body), ""


def _revision(rs: Mapping[str, Any]) -> int | None:
    """A ReplicaSet's revision; none is revision 0 and an unparsable one is skipped, as the plugin reads it."""
    text = ((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION)
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        return None


def _derives(mine: Any, theirs: Any) -> bool:
    """Kubernetes' semantic DeepDerivative: every field set in `mine` equals `theirs`' (unset ones are free)."""
    if mine is None or mine == {} or mine == [] or mine == "":
        return True
    if isinstance(mine, Mapping):
        return isinstance(theirs, Mapping) and all(_derives(v, theirs.get(k)) for k, v in mine.items())
    if isinstance(mine, list):
        return isinstance(theirs, list) and len(mine) == len(theirs) and all(map(_derives, mine, theirs))
    return bool(mine == theirs)


def _without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(template))
    labels = (out.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return out


def owned_replicasets(rollout: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    uid = (rollout.get("metadata") or {}).get("uid")
    return [rs for rs in replicasets if any(ref.get("controller") and ref.get("uid") == uid
                                            for ref in (rs.get("metadata") or {}).get("ownerReferences") or [])]


def undo_body(rollout: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
              to_revision: int = 0) -> tuple[list[dict[str, Any]] | None, str, int | None]:
    """The JSON patch that puts back the pod template of `to_revision` (0: the one before the latest), the
    reason when nothing is sent, and the revision chosen. The controller then rolls that template out as a
    new revision, through the Rollout's own steps."""
    revisions = sorted(((r, rs) for rs in owned_replicasets(rollout, replicasets)
                        if (r := _revision(rs)) is not None), key=lambda pair: pair[0])
    if to_revision:
        chosen = next(((r, rs) for r, rs in revisions if r == to_revision), None)
        if chosen is None:
            return None, f"revision {to_revision} is not in its history ({', '.join(str(r) for r, _ in revisions) or 'none'})", None
    elif len(revisions) < 2:
        return None, "no earlier revision in its history to go back to", None
    else:
        chosen = revisions[-2]
    revision, rs = chosen
    template = _without_hash((rs.get("spec") or {}).get("template") or {})
    if _derives(_without_hash((rollout.get("spec") or {}).get("template") or {}), template):
        return None, f"its template already matches revision {revision}", revision
    return [{"op": "replace", "path": "/spec/template", "value": template}], "", revision
