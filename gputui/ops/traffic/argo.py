"""Argo Rollouts' own verbs, as `kubectl argo rollouts` sends them (read from its module,
pkg/kubectl-argo-rollouts/cmd/{promote,abort,retry}, v1.8.3): merge patches on the Rollout's status
subresource first, then on its spec. They depend on the Rollout as read now (its pause conditions, its
step, whether it is fully promoted already), so they are built from the object, never from the snapshot."""

from __future__ import annotations

from typing import Any, Mapping

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
