"""The live backend's writes, straight to the apiserver: cordon, annotate (with a resourceVersion precondition
for the drain lease), evict (kubectl's reading of each answer), delete, get and patch; and who we are and
what we may do (SelfSubjectReview, SelfSubjectAccessReview)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import urllib3

from gputui.backends.base import BackendError, ConflictError, EvictionOutcome, EvictionResult, stale_json_patch
from gputui.backends.kube_dra import DRA_GROUP
from gputui.backends.kube_errors import ApiError, Unreachable, decode_answer
from gputui.backends.kube_http import PROBE_TIMEOUT_S, READ_TIMEOUT_S, Connection, path_of
from gputui.base.errors import transport_reason

DEVICE_TAINT_VERSION = "v1"  # DeviceTaintRule: v1 since Kubernetes 1.37 (v1beta2 in 1.36, v1alpha3 before)

# Grants gputui never uses (000 §6, least privilege): each widens what a leaked kubeconfig can do. Asked only
# by `gputui check`, not at start-up (four more round trips before the first frame).
BEYOND_NEEDS: Mapping[str, Mapping[str, str]] = {
    "read secrets": {"verb": "get", "resource": "secrets"},
    "delete nodes": {"verb": "delete", "resource": "nodes"},
    "bind cluster roles": {"verb": "create", "resource": "clusterrolebindings", "group": "rbac.authorization.k8s.io"},
    "do anything (cluster-admin)": {"verb": "*", "resource": "*", "group": "*"},
}


class KubeWriter:
    def __init__(self, conn: Connection, identity: str) -> None:
        self.conn = conn
        self.identity = identity

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        body = {"spec": {"unschedulable": True if unschedulable else None}}
        self.conn.request("PATCH", path_of("", "v1", "nodes", name=node), body=body,
                          content_type="application/strategic-merge-patch+json")

    def annotate_node(self, node: str, annotations: Mapping[str, str | None],
                      resource_version: str | None = None) -> None:
        metadata: dict[str, Any] = {"annotations": dict(annotations)}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version  # a precondition: 409 if the node moved on
        try:
            self.conn.request("PATCH", path_of("", "v1", "nodes", name=node), body={"metadata": metadata},
                              content_type="application/merge-patch+json")
        except ApiError as exc:
            if exc.status == 409:
                raise ConflictError(f"node {node} changed since it was read") from None
            raise

    def beyond_needs(self) -> dict[str, bool | None]:
        return {grant: review(self.conn, **attrs) for grant, attrs in BEYOND_NEEDS.items()}

    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        meta = self.conn.request("GET", path_of("", "v1", "nodes", name=node)).get("metadata") or {}
        return dict(meta.get("annotations") or {}), str(meta.get("resourceVersion") or "")

    def evict_pod(self, namespace: str, name: str, grace_seconds: int | None = None,
                  uid: str | None = None) -> EvictionResult:
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        options = _delete_options(grace_seconds, uid)
        if options:
            body["deleteOptions"] = options
        try:
            self.conn.request("POST", path_of("", "v1", "pods", namespace, name) + "/eviction", body=body)
        except ApiError as exc:
            if exc.status == 404:
                return EvictionResult(EvictionOutcome.GONE)
            if exc.status == 409 and uid is not None:  # the apiserver's "Precondition failed: UID in precondition"
                return EvictionResult(EvictionOutcome.REPLACED, str(exc.body.get("message", exc)))
            if exc.status == 429:  # the causes name the budget and its numbers
                causes = "; ".join(c.get("message", "") for c in exc.causes if c.get("message"))
                message = str(exc.body.get("message", exc))
                return EvictionResult(EvictionOutcome.BLOCKED, f"{message} {causes}".strip())
            if exc.status == 403 and any(c.get("reason") == "NamespaceTerminating" for c in exc.causes):
                return EvictionResult(EvictionOutcome.BLOCKED, "namespace is terminating")
            if exc.status == 401 or exc.status >= 502 or (exc.status == 500 and "more than one" not in str(exc)):
                raise  # expired credentials or an apiserver in trouble: the drain pauses and tries again
            return EvictionResult(EvictionOutcome.FAILED, str(exc.body.get("message", exc)))
        return EvictionResult(EvictionOutcome.EVICTED)

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None,
                   uid: str | None = None) -> None:
        query = {"gracePeriodSeconds": grace_seconds} if grace_seconds is not None else None
        # The UID travels in a DeleteOptions body (a query has no preconditions); the grace period stays a query.
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid is not None else None
        try:
            self.conn.request("DELETE", path_of("", "v1", "pods", namespace, name), query, body=body)
        except ApiError as exc:
            if exc.status == 409 and uid is not None:
                raise ConflictError(f"pod {namespace}/{name} is no longer the pod planned (uid {uid}): "
                                    f"{exc.body.get('message', exc)}") from None
            if exc.status != 404:
                raise

    def get_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict:
        return self.conn.request("GET", path_of(group, version, plural, namespace, name))

    def list_objects(self, group: str, version: str, plural: str, namespace: str, label_selector: str = "") -> list[dict]:
        items: list[dict] = []
        cont = ""
        while True:
            page = self.conn.request("GET", path_of(group, version, plural, namespace),
                                     query={"labelSelector": label_selector or None, "limit": 500, "continue": cont or None})
            items += page.get("items") or []
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items

    def patch_object(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        patch: dict | list, patch_type: str = "merge", subresource: str = "",
    ) -> dict:
        content_type = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        path = path_of(group, version, plural, namespace, name) + (f"/{subresource}" if subresource else "")
        try:
            return self.conn.request("PATCH", path, body=patch, content_type=content_type)
        except ApiError as exc:
            if exc.status == 409 or stale_json_patch(exc.status, patch_type, patch, bool(exc.causes)):
                raise ConflictError(f'{plural}.{group} "{name}" changed since it was read ({exc})') from None
            raise

    def create_object(self, group: str, version: str, plural: str, namespace: str, body: dict) -> dict:
        """POST a namespaced object (the diagnostic's Job); the apiserver's answer is the object created."""
        return self.conn.request("POST", path_of(group, version, plural, namespace), body=body)

    def delete_object(self, group: str, version: str, plural: str, namespace: str, name: str,
                      propagation: str = "Foreground") -> None:
        """DELETE, its dependents per `propagation` (Foreground: the Job stays until its pods are gone); a 404 is
        already done."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        try:
            self.conn.request("DELETE", path_of(group, version, plural, namespace, name), body=body)
        except ApiError as exc:
            if exc.status != 404:
                raise

    def pod_log(self, namespace: str, name: str, container: str = "", limit_bytes: int = 8_000_000) -> str:
        """A container's log as text (the apiserver's pods/log, proxied from the kubelet), at most `limit_bytes`."""
        conn = self.conn
        query = {"container": container or None, "limitBytes": limit_bytes}
        try:
            resp = conn.pool.request("GET", conn.url(path_of("", "v1", "pods", namespace, name) + "/log", query),
                                     headers=conn.headers(), retries=False, preload_content=True,
                                     timeout=urllib3.Timeout(connect=PROBE_TIMEOUT_S, read=READ_TIMEOUT_S))
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(conn.host, transport_reason(exc)) from None
        if not 200 <= resp.status < 300:
            decode_answer(resp.status, resp.data, conn.host)  # raises the ApiError the answer means
        return bytes(resp.data[:limit_bytes]).decode("utf-8", errors="replace")

    def feature_gate(self, name: str) -> tuple[bool | None, str]:
        """From the apiserver's own /metrics (kubernetes_feature_enabled, served since 1.26): no API says it."""
        conn = self.conn
        try:
            resp = conn.pool.request("GET", conn.url("/metrics"), headers=conn.headers(), retries=False,
                                     preload_content=True,
                                     timeout=urllib3.Timeout(connect=PROBE_TIMEOUT_S, read=READ_TIMEOUT_S))
        except urllib3.exceptions.HTTPError as exc:
            return None, f"the apiserver's /metrics could not be read ({transport_reason(exc)})"
        if resp.status in (401, 403):
            return None, "your identity may not read the apiserver's /metrics"
        if not 200 <= resp.status < 300:
            return None, f"the apiserver's /metrics answered {resp.status}"
        wanted = f'kubernetes_feature_enabled{{name="{name}",'
        for line in bytes(resp.data).decode("utf-8", errors="replace").splitlines():
            if line.startswith(wanted):
                return line.rsplit(" ", 1)[-1].strip() == "1", ""
        return None, f"the apiserver's /metrics does not name the {name} gate"

    def set_node_condition(self, node: str, kind: str, status: str, reason: str, message: str) -> None:
        # Node conditions merge by type in a strategic merge patch (as the kubelet writes its own): the others stay.
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        condition = {"type": kind, "status": status, "reason": reason, "message": message,
                     "lastTransitionTime": now, "lastHeartbeatTime": now}
        self.conn.request("PATCH", path_of("", "v1", "nodes", name=node) + "/status",
                          body={"status": {"conditions": [condition]}},
                          content_type="application/strategic-merge-patch+json")

    def taint_device(self, name: str, device: str, key: str, value: str, effect: str) -> dict:
        """One DRA device's DeviceTaintRule (resource.k8s.io/v1: served and its gates GA in v1.37), created or its
        taint set. Never NoExecute: the device-taint eviction controller deletes pods, past PDBs and session waits."""
        if effect not in ("None", "NoSchedule"):
            raise BackendError(f"refused: a DeviceTaintRule with effect {effect!r} (only None or NoSchedule)")
        driver, rest = device.split("/", 1)
        pool, dev = rest.rsplit("/", 1)  # a pool's name may hold slashes; a driver's and a device's do not
        spec = {"deviceSelector": {"driver": driver, "pool": pool, "device": dev},
                "taint": {"key": key, "value": value, "effect": effect}}
        body = {"apiVersion": f"{DRA_GROUP}/{DEVICE_TAINT_VERSION}", "kind": "DeviceTaintRule",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gputui"}}, "spec": spec}
        try:
            return self.conn.request("POST", path_of(DRA_GROUP, DEVICE_TAINT_VERSION, "devicetaintrules"), body=body)
        except ApiError as exc:
            if exc.status != 409:
                raise
        return self.conn.request("PATCH", path_of(DRA_GROUP, DEVICE_TAINT_VERSION, "devicetaintrules", name=name),
                                 body={"spec": spec}, content_type="application/merge-patch+json")

    def device_taint_rule(self, name: str) -> dict | None:
        try:
            return self.conn.request("GET", path_of(DRA_GROUP, DEVICE_TAINT_VERSION, "devicetaintrules", name=name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def pod_uid(self, namespace: str, name: str) -> str | None:
        try:
            body = self.conn.request("GET", path_of("", "v1", "pods", namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return (body.get("metadata") or {}).get("uid")


def _delete_options(grace_seconds: int | None, uid: str | None) -> dict[str, Any]:
    """An eviction's deleteOptions: no grace period unless one was chosen (the pod's own, never 0 by accident); the
    UID precondition, so that a pod replaced under the same name (a StatefulSet's) is never the one evicted."""
    options: dict[str, Any] = {}
    if grace_seconds is not None:
        options["gracePeriodSeconds"] = grace_seconds
    if uid is not None:
        options["preconditions"] = {"uid": uid}
    return options


def whoami(conn: Connection) -> str:
    """The acting identity, from a SelfSubjectReview (falls back to the kubeconfig user)."""
    try:
        body = conn.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                            timeout=PROBE_TIMEOUT_S)
        return ((body.get("status") or {}).get("userInfo") or {}).get("username") or conn.user
    except BackendError:
        return conn.user or "unknown"


def review(conn: Connection, verb: str, resource: str, subresource: str = "", group: str = "",
           namespace: str = "") -> bool | None:
    """May the identity do this (SelfSubjectAccessReview)? None when the review itself failed."""
    try:
        return _ask(conn, verb, resource, subresource, group, namespace)
    except BackendError:
        return None


class ReviewFailed(BackendError):
    """An access review that got no verdict: the apiserver answered the review itself with an error (a 5xx, a
    401, a 403 on selfsubjectaccessreviews, a 429) or with no `allowed` in it. Whether the identity may do it
    is unknown: never allowed (fail closed), never worded as a denial."""


def allowed(conn: Connection, verb: str, resource: str, subresource: str = "", group: str = "",
            namespace: str = "") -> bool:
    """For a write gputui needs: True or False as the apiserver decided. A review without a verdict raises:
    Unreachable when nobody answered (refused, timed out), ReviewFailed when the answer was an error. Neither
    is a denial: the caller records the permission as unknown, with this cause (Backend.unknown)."""
    try:
        return _ask(conn, verb, resource, subresource, group, namespace)
    except Unreachable:
        raise
    except BackendError as exc:
        raise ReviewFailed(str(exc)) from None


def _ask(conn: Connection, verb: str, resource: str, subresource: str, group: str, namespace: str) -> bool:
    attrs = {"verb": verb, "resource": resource, "subresource": subresource, "group": group}
    if namespace:  # a namespaced kind's write, asked where gputui makes it ("": every namespace, or cluster-scoped)
        attrs["namespace"] = namespace
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}
    answer = conn.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body,
                          timeout=PROBE_TIMEOUT_S)
    status = answer.get("status") if isinstance(answer, dict) else None
    verdict = status.get("allowed") if isinstance(status, dict) else None
    if not isinstance(verdict, bool):  # an answer without a verdict (a proxy's page, an empty body) says nothing
        raise BackendError("the access review's answer held no verdict")
    return verdict
