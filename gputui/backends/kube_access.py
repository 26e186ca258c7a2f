"""Which writes the identity may make: the access reviews (SelfSubjectAccessReview) asked once per connection,
each answered allowed, denied, or unknown with its cause. Backend.why_not words them; nothing else decides."""

from __future__ import annotations

from collections.abc import Mapping

from gputui.backends.base import BackendError
from gputui.backends.kube_errors import Unreachable
from gputui.backends.kube_http import Connection
from gputui.backends.kube_writer import ReviewFailed, allowed
from gputui.vocabulary.disruptions import MAINTENANCE_GROUP
from gputui.vocabulary.router_kinds import ROUTER_KINDS

# What the UI may offer, and the access review that decides it ("shift" is asked of the route kinds served).
PERMISSIONS: dict[str, dict[str, str]] = {
    "cordon": {"verb": "patch", "resource": "nodes"},
    "evict": {"verb": "create", "resource": "pods", "subresource": "eviction"},
    "patch_pods": {"verb": "patch", "resource": "pods"},
    "scale": {"verb": "patch", "resource": "deployments", "subresource": "scale", "group": "apps"},
}


def _words(attrs: Mapping[str, str]) -> str:
    """A review in the words of the apiserver's own refusal: "patch deployments/scale (apps)"."""
    sub = f"/{attrs['subresource']}" if attrs.get("subresource") else ""
    group = f" ({attrs['group']})" if attrs.get("group") else ""
    where = f" in namespace {attrs['namespace']}" if attrs.get("namespace") else ""
    return f"{attrs['verb']} {attrs['resource']}{sub}{group}{where}"


def access_reviews(conn: Connection, routers: Mapping[str, str], discovery_error: BackendError | None,
                   maintenance_namespace: str = "",
                   ) -> tuple[dict[str, bool], dict[str, str], dict[str, str]]:
    """The one place the identity's permissions are decided: each review gputui's writes need, asked once.

    Returns (permissions, unknown, words): a review the apiserver answered is allowed or denied; one without a
    verdict (an error answer, a timeout) is unknown, with its cause, never a denial. The first review that got
    no answer at all ends the asking (each would wait as long) and leaves the rest unknown; when discovery got
    none either, nobody answers at all and Unreachable is raised. "shift" is asked of every route kind the
    cluster serves (and an Argo Rollout's status, which its verbs patch): none served, nothing to review.
    `maintenance_namespace`: where a requestor drain makes its NodeMaintenance, when the cluster serves the kind
    ("": it does not); its create (the drain) and delete (abort, uncordon) are reviewed there."""
    asks: dict[str, list[Mapping[str, str]]] = {action: [attrs] for action, attrs in PERMISSIONS.items()}
    unknown: dict[str, str] = {}
    words: dict[str, str] = {}
    for verb in ("create", "delete") if maintenance_namespace else ():
        attrs: Mapping[str, str] = {"verb": verb, "resource": "nodemaintenances", "group": MAINTENANCE_GROUP,
                 "namespace": maintenance_namespace}
        words[f"nodemaintenance_{verb}"] = _words(attrs)
        if discovery_error is not None:  # whether the kind is served is unknown, and so what the review means
            unknown[f"nodemaintenance_{verb}"] = f"API discovery failed: {discovery_error}"
        else:
            asks[f"nodemaintenance_{verb}"] = [attrs]
    if discovery_error is not None:
        unknown["shift"] = f"the route kinds served are unknown: API discovery failed: {discovery_error}"
    else:
        # Every kind of the router table served (two kinds of one group are two reviews); a kind whose
        # controller owns the weights (Argo's Rollout) is patched through its status too.
        routes: list[Mapping[str, str]] = []
        for kind in routers:
            row = ROUTER_KINDS.get(kind)
            if row is None:
                continue
            routes.append({"verb": "patch", "resource": row.plural, "group": row.group})
            if row.weights is None:
                routes.append({"verb": "patch", "resource": row.plural, "subresource": "status", "group": row.group})
        if routes:
            asks["shift"] = routes
    permissions: dict[str, bool] = {}
    for action, reviews in asks.items():
        denied, failed = [], ""
        for attrs in reviews:
            try:
                if not allowed(conn, **attrs):
                    denied.append(_words(attrs))
            except ReviewFailed as exc:
                failed = failed or str(exc)
            except Unreachable as exc:
                if isinstance(discovery_error, Unreachable):
                    raise
                cause = f"the apiserver {exc.host} could not be reached ({exc.reason})"
                unknown.update((a, cause) for a in asks if a not in permissions and a not in unknown)
                return permissions, unknown, words
        if denied:  # a definite no decides, whatever else got no verdict
            permissions[action], words[action] = False, " or ".join(denied)
        elif failed:
            unknown[action], words[action] = failed, " and ".join(_words(a) for a in reviews)
        else:
            permissions[action] = True
    return permissions, unknown, words
