"""The drain's placement preview against the real kube-scheduler (issue 39): clusters on the harness with zones,
dedicated taints, anti-affinity, spread constraints, node affinity and CPU requests; gputui's plan says where
each evicted pod's replacement can go; gputui drains; the real scheduler places (or does not place) each
replacement. Every pod the preview surely sent somewhere is bound (to a node it named, when it named them all);
every pod it surely said has nowhere to go stays Pending.

The first test is the issue's own measurement: an 8-GPU pod with nodeSelector zone=z1 in a zone whose other
node is full. The old plan said it fits ("16 free", all in z2) and the drain started; its replacement stayed
Pending. Now the plan is blocked, a drain refuses to start before any write, and, once the operator accepts it,
the replacement stays Pending as predicted."""

from __future__ import annotations

import json

from kubernetes import client

from gputui.ops.context import OpContext
from gputui.ops.drain.start import BatchStart
from gputui.ops.steps import run_steps
from tests.support.gputui_cli import run
from tests.support.placement_cases import POOL, ZONE, Case, NodeSpec, Workload, judge, live_pods
from tests.support.procs import wait_until
from tests.support.workloads import backend_for

OPTIONS_ARGS = ("--force", "--delete-emptydir-data")


def apis(cluster):
    api = cluster.harness_client()
    return client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)


def fresh_snapshot(backend, core, case: Case):
    """gputui's snapshot once it holds every live pod of the case where the API has it."""
    def check():
        snap = backend.reader.snapshot()
        want = {f"{case.ns}/{p.metadata.name}": p.spec.node_name or "" for p in live_pods(core, case.ns)}
        have = {p.key: p.node for p in snap.pods if p.namespace == case.ns and not p.deleting}
        return snap if have == want else None
    return wait_until(check, 60, what=f"gputui's snapshot of {case.ns}")


def drain_and_judge(cluster, prometheus, tmp_path, case: Case, batch_nodes: list[str]):
    """gputui's plan of the batch, gputui's drain of it (the stranded pods accepted), and each workload's
    placements against what the real scheduler did. Returns (batch plan, judged, where each bound pod is)."""
    from gputui.ops.audit import AuditLog
    from gputui.ops.drain.batch import run_batch
    from gputui.ops.drain.batch_plan import plan_batch
    from gputui.ops.drain.plan import DrainOptions
    from gputui.ops.drain.report import Outcome

    core, _apps, _policy = apis(cluster)
    backend = backend_for(cluster, prometheus)
    try:
        snap = fresh_snapshot(backend, core, case)
        options = DrainOptions(force=True, delete_emptydir_data=True)
        batch = plan_batch(snap, batch_nodes, options)
        placements = [p.placement for plan in batch.plans for p in plan.pods if p.placement is not None]
        before = {p.metadata.name for p in live_pods(core, case.ns)}
        evicted = [p.pod.key for p in placements]
        accepted = [p.pod.key for p in batch.stranded]
        gen = run_batch(batch_nodes,
                        OpContext(backend.reader, backend.writer, AuditLog(tmp_path / "audit.jsonl", "t", "test"),
                                  poll_s=0.5),
                        options, BatchStart(accept_stranded=accepted))
        events: list = []
        reports = run_steps(gen, events.append)
        assert all(r.outcome is Outcome.DRAINED for r in reports.values()), [e.message for e in events]
        outcome = case.outcome(core, evicted, before)
        where = {p.metadata.labels["app"]: p.spec.node_name for p in live_pods(core, case.ns)
                 if p.metadata.name not in before and p.spec.node_name}
        return batch, judge(placements, outcome), where
    finally:
        backend.close()


def test_the_issue_case_a_pod_pinned_to_a_full_zone_is_stranded(cluster, fake_kubelet, prometheus, tmp_path):
    core, apps, _ = apis(cluster)
    case = Case("issue", [NodeSpec("pl-issue-z1-a", "z1"), NodeSpec("pl-issue-z1-b", "z1"),
                          NodeSpec("pl-issue-z2-a", "z2"), NodeSpec("pl-issue-z2-b", "z2")],
                [Workload("pinned", gpus=8, spec={"nodeSelector": {ZONE: "z1"}}, on=["pl-issue-z1-a"]),
                 Workload("filler", gpus=8, on=["pl-issue-z1-b"])])
    try:
        case.build(fake_kubelet, core, apps)
        common = ("--kubeconfig", str(cluster.admin_kubeconfig), "--prometheus", prometheus.url)
        out = run("drain", *common, "pl-issue-z1-a", "--dry-run", "-o", "json", *OPTIONS_ARGS, home=tmp_path)
        # The old plan: capacity fits (16 free H100 in z2), exit 0. Now: blocked, exit 1, and why.
        assert out.returncode == 1, out.stdout + out.stderr
        plan = json.loads(out.stdout)
        assert plan["capacity"][0]["fits"] is True  # the GPU model's count alone still says so
        (pod,) = [p for p in plan["nodes"][0]["pods"] if p["name"].startswith("pinned-")]
        assert pod["placement"]["verdict"] == "nowhere" and pod["placement"]["sure"]
        assert pod["placement"]["why"] == (f"no node with {POOL}=issue and {ZONE}=z1 outside the batch has 8 free "
                                           f"NVIDIA-H100-80GB-HBM3 GPUs")
        assert plan["placement"]["blocked"] and plan["guard_stops_before"] == "pl-issue-z1-a"
        text = run("drain", *common, "pl-issue-z1-a", "--dry-run", *OPTIONS_ARGS, home=tmp_path).stdout
        assert (f"NOWHERE: no node with {POOL}=issue and {ZONE}=z1 outside the batch has 8 free "
                f"NVIDIA-H100-80GB-HBM3 GPUs") in text
        assert "not where it will go" in text
        # A drain refuses before any write: the pod stays, the node is not cordoned.
        refused = run("drain", *common, "pl-issue-z1-a", *OPTIONS_ARGS, home=tmp_path)
        assert refused.returncode == 1 and "would have nowhere to go" in refused.stderr, refused.stderr
        assert not core.read_node("pl-issue-z1-a").spec.unschedulable
        assert [p.spec.node_name for p in live_pods(core, case.ns) if p.metadata.labels["app"] == "pinned"] == \
            ["pl-issue-z1-a"]
        # Accepted: drained; the real scheduler leaves the replacement Pending, as predicted.
        _batch, judged, _where = drain_and_judge(cluster, prometheus, tmp_path, case, ["pl-issue-z1-a"])
        assert [(j.app, j.sure_nowhere, j.pending) for j in judged] == [("pinned", 1, 1)]
        assert sum(j.contradictions for j in judged) == 0
    finally:
        case.tear_down(fake_kubelet, core)


def test_a_pod_tolerating_only_a_dedicated_taint_held_by_the_batch(cluster, fake_kubelet, prometheus, tmp_path):
    core, apps, _ = apis(cluster)
    llm = {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}
    other = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}

    def tolerate(t: dict[str, str]) -> dict[str, str]:
        return {"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]}

    nodes = [NodeSpec(f"pl-ded-d{i}", taints=[llm]) for i in range(3)] + \
        [NodeSpec(f"pl-ded-o{i}", taints=[other]) for i in range(2)]
    case = Case("ded", nodes, [
        Workload("only-llm", spec={"tolerations": [tolerate(llm)]}, on=["pl-ded-d0"]),
        Workload("both", spec={"tolerations": [tolerate(llm), tolerate(other)]}, on=["pl-ded-d1"])])
    try:
        case.build(fake_kubelet, core, apps)
        batch, judged, where = drain_and_judge(cluster, prometheus, tmp_path, case, [f"pl-ded-d{i}" for i in range(3)])
        by = {p.pod.labels["app"]: p.placement for plan in batch.plans for p in plan.pods if p.placement}
        assert by["only-llm"].why == "tolerates only dedicated=llm:NoSchedule, held by 3 nodes, all in the batch"
        assert by["both"].verdict.value == "can go" and by["both"].nodes == ("pl-ded-o0", "pl-ded-o1")
        assert {(j.app, j.sure_go, j.sure_nowhere, j.bound, j.pending) for j in judged} == {
            ("only-llm", 0, 1, 0, 1), ("both", 1, 0, 1, 0)}
        assert where["both"] in ("pl-ded-o0", "pl-ded-o1")
        assert sum(j.contradictions for j in judged) == 0
    finally:
        case.tear_down(fake_kubelet, core)


def test_anti_affinity_and_spread_count_the_batch_as_the_scheduler_does(cluster, fake_kubelet, prometheus, tmp_path):
    """x: hostname anti-affinity, one per node; y: zones kept within 1 of each other; w: the same over the nodes
    labelled row=front only. Draining a1 leaves its zone z1 with none of each: x and y can go only to a2 (the
    other zones already hold one each), w nowhere (a2 is not in its rows, and z2, z3 would be 2 against 0)."""
    core, apps, _ = apis(cluster)
    front = {"row": "front"}
    nodes = [NodeSpec("pl-spr-a1", "z1", labels=front), NodeSpec("pl-spr-a2", "z1"),
             NodeSpec("pl-spr-b1", "z2", labels=front), NodeSpec("pl-spr-c1", "z3", labels=front)]
    spots = ["pl-spr-a1", "pl-spr-b1", "pl-spr-c1"]

    def spread(app: str) -> list[dict]:
        return [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": app}}}]

    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    case = Case("spr", nodes, [
        Workload("x", replicas=3, spec={"affinity": anti}, on=spots),
        Workload("y", replicas=3, spec={"topologySpreadConstraints": spread("y")}, on=spots),
        Workload("w", replicas=3, spec={"topologySpreadConstraints": spread("w"), "nodeSelector": front}, on=spots)])
    try:
        case.build(fake_kubelet, core, apps)
        batch, judged, where = drain_and_judge(cluster, prometheus, tmp_path, case, ["pl-spr-a1"])
        by = {p.pod.labels["app"]: p.placement for plan in batch.plans for p in plan.pods if p.placement}
        assert by["x"].nodes == ("pl-spr-a2",) and by["y"].nodes == ("pl-spr-a2",) and by["w"].stranded
        assert "where one more breaks maxSkew 1 of app=w over topology.kubernetes.io/zone" in by["w"].why
        assert {(j.app, j.sure_go, j.sure_nowhere, j.bound, j.pending) for j in judged} == {
            ("x", 1, 0, 1, 0), ("y", 1, 0, 1, 0), ("w", 0, 1, 0, 1)}
        assert where == {"x": "pl-spr-a2", "y": "pl-spr-a2"}
        assert sum(j.contradictions for j in judged) == 0
    finally:
        case.tear_down(fake_kubelet, core)


def test_node_affinity_operators_and_cpu_requests(cluster, fake_kubelet, prometheus, tmp_path):
    """new: gen > 3 and 12 CPUs: g3 (gen 4) has 8 CPUs, g2 is gen 2: nowhere. any: a gen label and 4 CPUs: g2
    or g3."""
    core, apps, _ = apis(cluster)
    nodes = [NodeSpec("pl-aff-g1", labels={"gen": "5"}, cpu="16"), NodeSpec("pl-aff-g2", labels={"gen": "2"}),
             NodeSpec("pl-aff-g3", labels={"gen": "4"}, cpu="8"), NodeSpec("pl-aff-g4")]

    def needs(*expressions: dict) -> dict:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": list(expressions)}]}}}

    case = Case("aff", nodes, [
        Workload("new", cpu="12", spec={"affinity": needs({"key": "gen", "operator": "Gt", "values": ["3"]})},
                 on=["pl-aff-g1"]),
        Workload("any", cpu="4", spec={"affinity": needs({"key": "gen", "operator": "Exists"})}, on=["pl-aff-g1"])])
    try:
        case.build(fake_kubelet, core, apps)
        batch, judged, where = drain_and_judge(cluster, prometheus, tmp_path, case, ["pl-aff-g1"])
        by = {p.pod.labels["app"]: p.placement for plan in batch.plans for p in plan.pods if p.placement}
        assert by["new"].why == f"no node with {POOL}=aff and gen>3 outside the batch has 12 free CPUs"
        assert by["any"].nodes == ("pl-aff-g2", "pl-aff-g3")
        assert {(j.app, j.sure_go, j.sure_nowhere, j.bound, j.pending) for j in judged} == {
            ("new", 0, 1, 0, 1), ("any", 1, 0, 1, 0)}
        assert where["any"] in ("pl-aff-g2", "pl-aff-g3")
    finally:
        case.tear_down(fake_kubelet, core)
