"""A pod replaced under its own name between the drain's look and its eviction, on the real apiserver: a
StatefulSet recreates `kv-0` with a new UID, and an eviction by name alone would evict the new pod, which the
drain never planned. The eviction carries the planned pod's UID (deleteOptions.preconditions.uid): the apiserver
answers 409, the new pod is left alone, and the drain counts the planned pod as replaced, audited once.

The race is made real by the reader: the drain's pods view is read while `kv-0` is still the planned pod, then
the pod is deleted and the StatefulSet controller recreates it before the view is handed back, so the drain's
next write is the eviction of a name whose pod has changed."""

from __future__ import annotations

from collections.abc import Collection

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.plan import Step, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.ops.steps import run_steps
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from tests.support.audit_lines import written
from tests.support.drain_safety import POOL_LABEL, batch_pods, brief, pods_on, scene
from tests.support.procs import wait_until


class ReplacingReader:
    """The live reader; its first pods view is read, then the pod under `name` is deleted and waited for until
    its StatefulSet has recreated it (a new UID under the same name), and only then is the view handed back."""

    def __init__(self, reader, core, ns: str, name: str, uid: str) -> None:
        self.reader, self.core, self.ns, self.name, self.uid = reader, core, ns, name, uid
        self.new_uid = ""

    def __getattr__(self, attr: str):
        return getattr(self.reader, attr)

    def snapshot(self) -> ClusterSnapshot:
        return self.reader.snapshot()

    def pods_snapshot(self, keys: Collection[str], namespaces: Collection[str] = ()) -> ClusterSnapshot:
        snap = self.reader.pods_snapshot(keys, namespaces)
        if not self.new_uid:
            assert [p.uid for p in snap.pods if p.name == self.name] == [self.uid]  # the view is right when read
            self.core.delete_namespaced_pod(self.name, self.ns, grace_period_seconds=0)

            def recreated() -> str | None:
                pods = [p for p in self.core.list_namespaced_pod(self.ns).items if p.metadata.name == self.name]
                return pods[0].metadata.uid if pods and pods[0].metadata.uid != self.uid else None
            self.new_uid = wait_until(recreated, 30, what=f"{self.name} recreated by its StatefulSet")
        return snap


def test_a_pod_replaced_under_its_name_before_its_eviction_is_not_evicted(cluster, fake_kubelet, tmp_path):
    """Fails on the code before the UID precondition (gputui/ops/drain/run.py evicting by name): the eviction
    of kv-0 is accepted (201) and the StatefulSet's new pod, never planned, is evicted; the drain calls it gone."""
    ns, node = "t-evict-replaced", "evict-replaced"
    spare = f"{node}-spare"
    nodes = {n: {"gpus": 4, "labels": {POOL_LABEL: node}} for n in (node, spare)}
    with scene(cluster, fake_kubelet, ns, nodes) as (core, apps, _policy):
        body = batch_pods("kv", ns, node, 1)
        body["kind"], body["spec"]["serviceName"] = "StatefulSet", "kv"
        core.patch_node(spare, {"spec": {"unschedulable": True}})  # kv-0 first lands on the node drained
        apps.create_namespaced_stateful_set(ns, body)
        try:
            (old,) = pods_on(core, ns, node, 1)
            core.patch_node(spare, {"spec": {"unschedulable": None}})  # where the new kv-0 goes
            assert old.metadata.name == "kv-0"
            backend = live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig)))
            try:
                snap = wait_until(lambda: (s := backend.reader.snapshot()) and
                                  [p for p in s.pods_on(node) if p.namespace == ns] and s, 30, what="kv-0 in view")
                plan = plan_drain(snap, node)
                assert [(p.pod.name, p.pod.uid, p.step) for p in plan.to_evict if p.pod.namespace == ns] == \
                    [("kv-0", old.metadata.uid, Step.EVICT)]
                reader = ReplacingReader(backend.reader, core, ns, "kv-0", old.metadata.uid)
                audit_file = tmp_path / "audit.jsonl"
                mark = cluster.audit_mark()
                events: list = []
                report = run_steps(run_drain(plan,
                                             OpContext(reader, backend.writer,
                                                       AuditLog(audit_file, backend.writer.identity, backend.context),
                                                       poll_s=0.3)), events.append)
            finally:
                backend.close()
            said = [(e.kind, e.pod, e.message) for e in events if e.kind is not EventKind.TICK]
            # The new kv-0 stands, untouched: same UID as recreated, no deletion asked.
            live = core.read_namespaced_pod("kv-0", ns)
            assert reader.new_uid and live.metadata.uid == reader.new_uid, said
            assert live.metadata.deletion_timestamp is None, said
            evictions = [brief(e) for e in cluster.audit_events("admin", since=mark, verbs={"create"}, resource="pods")
                         if (e.get("objectRef") or {}).get("subresource") == "eviction"]
            assert evictions == [("create", "pods/eviction", ns, "kv-0", 409)], evictions
            # The planned pod is over (replaced), not evicted and not "gone" as if the new one were.
            key = f"{ns}/kv-0"
            assert [k for k, p, _ in said if p == key and k in (EventKind.EVICTED, EventKind.GONE)] == [], said
            assert [m for k, p, m in said if p == key and k is EventKind.REPLACED] == [
                f"replaced under its name before its eviction (a new pod, uid {reader.new_uid}, stands; not evicted)"]
            assert report.outcome is Outcome.DRAINED and report.evicted == 0 and len(report.replaced) == 1, report
            # Audited once: one intent for the eviction, one result saying it was refused as replaced.
            mine = [x for x in written(audit_file) if x["target"] == f"pod/{key}"]
            assert [(x["action"], x["phase"], x["result"].split(":")[0]) for x in mine] == \
                [("evict", "result", "refused")], mine
            assert "replaced under its name" in mine[0]["result"]
        finally:
            apps.delete_namespaced_stateful_set("kv", ns)
