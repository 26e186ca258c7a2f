"""What the drain-safety tests of issue 34 share (tests/integration/test_lease_real.py, test_eviction_safety_real.py,
test_drain_audit_real.py, test_batch_guard_real.py): GPU nodes of their own on the fake kubelet, one-GPU pods that
carry no session signal, a drain run in a thread, a node's annotations as bytes, and the writes the apiserver's
audit log holds for the app's identity.

The pods are GPU batch pods (`gputui.io/session-signal: "false"`, as README's drain section documents): a drain
evicts them at once, so these tests exercise leases, evictions and their audit without any session count.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client

from gputui.ops.drain.events import EventKind
from gputui.ops.steps import run_steps
from gputui.vocabulary.sessions import SESSION_SIGNAL_LABEL
from tests.support.procs import wait_until

POOL_LABEL = "gputui.test/pool"
REVIEWS = ("selfsubjectreviews", "selfsubjectaccessreviews")  # asking who we are and what we may: not writes


def batch_pods(name: str, ns: str, pool: str, replicas: int, *, grace_s: int = 2,
               annotations: dict[str, str] | None = None) -> dict:
    """A Deployment of one-GPU pods without a session signal, pinned to the nodes labelled POOL_LABEL=pool."""
    labels = {"app": name, SESSION_SIGNAL_LABEL: "false"}
    meta: dict[str, Any] = {"labels": labels, **({"annotations": dict(annotations)} if annotations else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": meta, "spec": {
                    "nodeSelector": {POOL_LABEL: pool}, "terminationGracePeriodSeconds": grace_s,
                    "containers": [{"name": "batch", "image": "vllm/vllm-openai:v0.9.0",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def budget(name: str, app: str, min_available: int) -> dict:
    return {"metadata": {"name": name}, "spec": {"minAvailable": min_available,
                                                 "selector": {"matchLabels": {"app": app}}}}


def pods_on(core, ns: str, node: str, n: int, timeout: float = 60) -> list:
    """Wait for exactly N live pods of the namespace Running on the node; returned by name."""
    def check():
        pods = [p for p in core.list_namespaced_pod(ns).items
                if p.spec.node_name == node and not p.metadata.deletion_timestamp and p.status.phase == "Running"]
        return sorted(pods, key=lambda p: p.metadata.name) if len(pods) == n else None
    return wait_until(check, timeout, what=f"{n} pods running on {node}")


def place(core, apps, ns: str, body: dict, node: str, n: int, spare: str | None = None) -> list:
    """Create the Deployment and wait for its N pods running on `node`. `spare`, a node of the same pool where the
    pods can go when evicted (a drain refuses, or strands, pods with nowhere to go), is cordoned meanwhile so
    that none lands there first."""
    if spare is not None:
        core.patch_node(spare, {"spec": {"unschedulable": True}})
    apps.create_namespaced_deployment(ns, body)
    pods = pods_on(core, ns, node, n)
    if spare is not None:
        core.patch_node(spare, {"spec": {"unschedulable": None}})
    return pods


@contextmanager
def scene(cluster, fake_kubelet, ns: str, nodes: dict[str, dict]) -> Iterator[tuple[Any, Any, Any]]:
    """A namespace and GPU nodes (name -> fake_kubelet.add_node keywords) of one test, removed after it (pods
    with grace 0 first, so a long grace period does not hold the namespace). Yields (core, apps, policy)."""
    api = cluster.harness_client()
    core: Any = client.CoreV1Api(api)  # typed by the client; the tests pass plain dicts, as the API takes them
    apps, policy = client.AppsV1Api(api), client.PolicyV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    try:
        for name, spec in nodes.items():
            fake_kubelet.add_node(name, **spec)
        yield core, apps, policy
    finally:
        try:
            apps.delete_collection_namespaced_deployment(ns)
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        finally:
            core.delete_namespace(ns)
            for name in nodes:  # session fixtures are shared: leave the fleet as it was
                fake_kubelet.remove_node(name)


def node_annotations(core, node: str) -> bytes:
    """The node's annotations as the apiserver holds them now, every key and value, as bytes to compare."""
    return json.dumps(core.read_node(node).metadata.annotations or {}, sort_keys=True).encode()


def app_writes(cluster, since, *, user: str = "admin", user_agent: str | None = None,
               keep: Callable[[dict], bool] = lambda _e: True) -> list[dict]:
    """Every write request of `user` since the mark (refused ones too), access reviews aside; with
    `user_agent`, only those sent under it (one gputui behind its own tests.support.api_faults proxy)."""
    return [e for e in cluster.write_requests(user, since=since)
            if (e.get("objectRef") or {}).get("resource") not in REVIEWS
            and (user_agent is None or e.get("userAgent") == user_agent) and keep(e)]


def brief(event: dict) -> tuple[str, str, str, str, int]:
    """(verb, resource[/subresource], namespace, name, status) of an audit event."""
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return (event.get("verb", ""), resource, ref.get("namespace", ""), ref.get("name", ""),
            (event.get("responseStatus") or {}).get("code", 0))


class Driver:
    """Runs a drain (run_drain's generator) in a thread and keeps its events."""

    def __init__(self, gen) -> None:
        self.events: list = []
        self.report = None
        self.error: BaseException | None = None
        self._gen = gen
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.report = run_steps(self._gen, self.events.append)
        except BaseException as exc:  # noqa: BLE001 - shown by join, never lost in a thread
            self.error = exc

    def kinds(self, kind: EventKind) -> list:
        return [e for e in self.events if e.kind is kind]

    def wait(self, predicate: Callable[[Driver], Any], timeout: float, what: str):
        """The predicate's first truthy answer; fails at once when the drain ended or raised without one."""
        deadline = time.monotonic() + timeout
        while True:
            alive = self.thread.is_alive()
            found = predicate(self)
            if found:
                return found
            if self.error is not None or not alive:
                raise AssertionError(f"the drain ended ({self.error!r}) before {what}: {self.said()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout}s: {self.said()}")
            time.sleep(0.1)

    def said(self) -> list[str]:
        return [f"{e.kind.value} {e.pod} {e.message}" for e in self.events if e.kind is not EventKind.TICK][-12:]

    def join(self, timeout: float = 60):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), self.said()
        assert self.error is None, repr(self.error)
        return self.report
