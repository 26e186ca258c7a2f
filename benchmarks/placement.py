"""The drain's placement preview against the real kube-scheduler, on random clusters and workloads; and its
cost on a large synthetic fleet.

Comparison (needs the control-plane binaries: scripts/build-control-plane.sh). Each case, seeded, on the real
apiserver, controller-manager and scheduler with the fake kubelet (tests.support.placement_cases): 4-7 GPU
nodes over 2-3 zones (2, 4 or 8 GPUs; 8, 16 or 96 CPUs; some with a pod limit of 3; some labelled gen=1..5;
some tainted dedicated=llm NoSchedule or NoExecute, or dedicated=batch), some cordoned; 2-4 Deployments of 1-3
replicas asking 1-8 GPUs and sometimes CPUs, each with, at random, a toleration of the llm taint, a zone
nodeSelector or a required node affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt), a required anti-affinity
(hostname or zone) against its own pods, a required affinity to another Deployment's pods, hard spread
constraints (maxSkew 1-2 over zone or hostname). The scheduler places them; a batch of 1-2 of the nodes that
hold pods is chosen; gputui reads the cluster (its live backend) and plans the batch; the batch is drained as
kubectl drains (all cordoned, then each pod evicted in the plan's order); then what the scheduler did with each
replacement is read (a replacement left Pending is asked again once, in the final state: see the support
module). A contradiction is a claim the preview made as sure (that holds whatever the batch's other pods do)
that the scheduler contradicted: a pod that can surely go left Pending, or a pod with surely nowhere to go bound.
Goal: 0. Contended claims (which depend on where the other pods land first, or on the scheduler's order) are
counted apart, with how often the preview's order matched.

Out of scope (the preview says "can go", never "will go"): the scheduler's scoring and preferred rules; which
of several contended pods wins; pods created meanwhile by anyone else; rules not read (a PersistentVolumeClaim's
node affinity, hostPorts, another scheduler, namespaceSelectors: such a pod's place is "unknown"); nodes
without GPUs (gputui does not watch them; a spread constraint's domains are counted over GPU nodes); DRA
device classes and selectors (devices counted per driver); preemption by priority; a toleration that
compares numbers (Lt/Gt, behind a feature gate).

Cost: the preview for a 10-node batch on a 10,000-node cluster, from a synthetic snapshot (no server).

    python benchmarks/placement.py [--cases 200] [--seed 1] [--parallel 8] [--start 0]
    python benchmarks/placement.py --cost-only [--nodes 10000] [--batch 10]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.ops.drain.placement import preview
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_resources import GpuResource, Scheme
from gputui.vocabulary.label_selectors import Requirement
from gputui.vocabulary.model import InferencePod, Node
from gputui.vocabulary.scheduling import NodeScheduling, PodScheduling, PodTerm, Spread, Taint, Toleration
from tests.support.placement_cases import ZONE, Case, NodeSpec, Workload, judge, live_pods

HOST = "kubernetes.io/hostname"


# --- random cases -------------------------------------------------------------------------------------------
def _node_affinity(rng: random.Random, zones: list[str]) -> dict:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("In", "NotIn"):
        expr = {"key": ZONE, "operator": op, "values": rng.sample(zones, rng.randint(1, len(zones) - 1))}
    elif op in ("Gt", "Lt"):
        expr = {"key": "gen", "operator": op, "values": [str(rng.randint(1, 4))]}
    else:
        expr = {"key": "gen", "operator": op}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [expr]}]}}}


def random_case(i: int, seed: int) -> Case:
    rng = random.Random(seed * 1000 + i)
    name = f"r{seed}x{i}"
    zones = ["z1", "z2"] if rng.random() < 0.5 else ["z1", "z2", "z3"]
    nodes = []
    for k in range(rng.randint(4, 7)):
        roll = rng.random()
        taints = [{"key": "dedicated", "value": "llm", "effect": rng.choice(["NoSchedule", "NoExecute"])}] \
            if roll < 0.2 else [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}] if roll < 0.3 else []
        labels = {"gen": str(rng.randint(1, 5))} if rng.random() < 0.6 else {}
        nodes.append(NodeSpec(f"pl-{name}-n{k}", rng.choice(zones), gpus=rng.choice([2, 4, 8, 8]), labels=labels,
                              taints=taints, cpu=rng.choice(["8", "16", "96"]),
                              pods=3 if rng.random() < 0.1 else 110, cordoned=rng.random() < 0.05))
    workloads = []
    for w in range(rng.randint(2, 4)):
        app = f"w{w}"
        spec: dict[str, Any] = {}
        if rng.random() < 0.5:
            spec["tolerations"] = [rng.choice([
                {"key": "dedicated", "operator": "Equal", "value": "llm"},
                {"key": "dedicated", "operator": "Exists"},
                {"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}])]
        affinity: dict[str, Any] = {}
        roll = rng.random()
        if roll < 0.15:
            spec["nodeSelector"] = {ZONE: rng.choice(zones)}
        elif roll < 0.35:
            affinity.update(_node_affinity(rng, zones))
        own = {"labelSelector": {"matchLabels": {"app": app}}}
        if rng.random() < 0.3:
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {**own, "topologyKey": rng.choice([HOST, ZONE])}]}
        if w and rng.random() < 0.15:
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": f"w{rng.randrange(w)}"}},
                 "topologyKey": rng.choice([HOST, ZONE])}]}
        if affinity:
            spec["affinity"] = affinity
        if rng.random() < 0.3:
            spec["topologySpreadConstraints"] = [{"maxSkew": rng.randint(1, 2), "topologyKey": rng.choice([ZONE, HOST]),
                                                  "whenUnsatisfiable": "DoNotSchedule", **own}]
        workloads.append(Workload(app, rng.randint(1, 3), rng.choice([1, 1, 2, 2, 4, 8]), spec,
                                  rng.choice([None, None, "2", "6"])))
    return Case(name, nodes, workloads)


@dataclass
class Tally:
    cases: int = 0
    skipped: int = 0  # no pod on any node a batch could take
    sure_go: int = 0
    sure_nowhere: int = 0
    contended: int = 0
    unknown: int = 0
    contradictions: list[str] = field(default_factory=list)
    contended_matched: int = 0  # contended workloads whose outcome is the sequential simulation's
    contended_workloads: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_case(h: Harness, i: int, seed: int, tally: Tally) -> None:
    from gputui.ops.drain.batch_plan import plan_batch
    from gputui.ops.drain.plan import DrainOptions
    from gputui.ops.drain.plan_placement import eviction_order

    case = random_case(i, seed)
    core, apps = h.clients()
    rng = random.Random(seed * 7919 + i)
    try:
        case.build(h.kubelet, core, apps)
        holding = sorted({p.spec.node_name for p in live_pods(core, case.ns) if p.spec.node_name})
        if not holding:
            with tally.lock:
                tally.skipped += 1
            return
        batch_nodes = rng.sample(holding, min(len(holding), rng.randint(1, 2)))
        snap = h.snapshot(core, case)
        batch = plan_batch(snap, batch_nodes, DrainOptions(force=True, delete_emptydir_data=True))
        placements = [p.placement for plan in batch.plans for p in plan.pods if p.placement is not None]
        order = [p.pod.key for plan in batch.plans for p in eviction_order(plan.pods)]
        before = {p.metadata.name for p in live_pods(core, case.ns)}
        case.drain(core, batch_nodes, order)
        outcome = case.outcome(core, order, before)
        judged = judge(placements, outcome)
        with tally.lock:
            tally.cases += 1
            for j in judged:
                tally.sure_go += j.sure_go
                tally.sure_nowhere += j.sure_nowhere
                tally.contended += j.contended
                tally.unknown += j.unknown
                if j.contradictions:
                    claims = [p.text() for p in placements if p.pod.labels["app"] == j.app]
                    tally.contradictions.append(f"case {i} (seed {seed}) batch {batch_nodes} {j.app}: bound "
                                                f"{j.bound}, pending {j.pending}; claimed: {claims}")
                if j.contended:
                    tally.contended_workloads += 1
                    sequential = [p for p in placements if p.pod.labels["app"] == j.app]
                    went = sum(1 for p in sequential if p.verdict.value == "can go")
                    tally.contended_matched += went == j.bound
        print(f"case {i}: batch {batch_nodes}: " + "; ".join(
            f"{j.app} sure-go {j.sure_go} sure-nowhere {j.sure_nowhere} contended {j.contended} unknown {j.unknown}"
            f" -> bound {j.bound} pending {j.pending}" for j in judged), flush=True)
    finally:
        case.tear_down(h.kubelet, core, wait=False)  # the namespace goes on its own; its nodes are gone


class Harness:
    """The control plane and the fake kubelet, started once; a live backend (gputui's reading) per case."""

    def __init__(self, stack: ExitStack) -> None:
        from tests.support.control_plane import ControlPlane
        from tests.support.fake_kubelet import FakeKubelet

        self.cp = stack.enter_context(ControlPlane())
        self.kubelet = FakeKubelet(self.cp.kubeconfigs["kubelet"], heartbeat_interval=10).start()
        stack.callback(self.kubelet.stop)
        if not self.kubelet.synced.wait(30):
            raise SystemExit(f"fake kubelet never synced: {self.kubelet.errors}")
        # The fake kubelet numbers its nodes for their podCIDR (10.244.N.0/24, N < 256); a run adds a thousand
        # nodes, a few dozen at a time: the numbers go round (a podCIDR shared by two nodes matters to no one here).
        self.kubelet._node_index = itertools.cycle(range(1, 250))  # type: ignore[assignment]
        from gputui.backends.kube_backend import live_backend
        from gputui.settings import Settings

        # One reading for every case (its watch caches follow the whole cluster), one case at a time.
        self.backend = live_backend(Settings(kubeconfig=str(self.cp.admin_kubeconfig)))
        stack.callback(self.backend.close)
        self.reading = threading.Lock()

    def clients(self):
        from kubernetes import client

        api = self.cp.harness_client()
        return client.CoreV1Api(api), client.AppsV1Api(api)

    def snapshot(self, core, case: Case) -> ClusterSnapshot:
        """gputui's snapshot once it holds every live pod of the case where the API has it."""
        from tests.support.procs import wait_until

        def check():
            with self.reading:
                snap = self.backend.reader.snapshot()
            want = {f"{case.ns}/{p.metadata.name}": p.spec.node_name or "" for p in live_pods(core, case.ns)}
            have = {p.key: p.node for p in snap.pods if p.namespace == case.ns and not p.deleting}
            return snap if have == want else None
        return wait_until(check, 60, what=f"gputui's snapshot of {case.ns}")


def compare(args: argparse.Namespace, figures: Figures) -> int:
    tally = Tally()
    started = time.monotonic()
    with ExitStack() as stack:
        h = Harness(stack)
        errors: list[str] = []
        following = args.start
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            # Until N cases are compared: a case with no pod where a batch could take one is skipped, and the
            # next seed's case is run in its place (at most N more).
            while tally.cases < args.cases and following < args.start + 2 * args.cases:
                wanted = args.cases - tally.cases
                futures = [pool.submit(run_case, h, i, args.seed, tally) for i in range(following, following + wanted)]
                following += wanted
                for f in futures:
                    try:
                        f.result()
                    except Exception as exc:  # noqa: BLE001 - a case the harness could not run: said, not counted
                        errors.append(f"{type(exc).__name__}: {exc}")
    spent = figures.add("comparison time", time.monotonic() - started, "s")
    for name, value in (("cases", tally.cases), ("skipped", tally.skipped), ("surely can go", tally.sure_go),
                        ("surely nowhere", tally.sure_nowhere), ("contended", tally.contended),
                        ("unknown", tally.unknown), ("contended workloads", tally.contended_workloads),
                        ("contended matched", tally.contended_matched)):
        figures.add(name, value, "", "")
    figures.add("not run", len(errors), "")
    figures.add("contradictions", len(tally.contradictions), "")  # goal 0
    print(f"\n{tally.cases} cases compared ({tally.skipped} skipped: no pod where a batch could take one; "
          f"{len(errors)} not run) in {spent / 60:.1f} min")
    print(f"predictions: {tally.sure_go} surely can go, {tally.sure_nowhere} surely nowhere, {tally.contended} "
          f"contended, {tally.unknown} unknown")
    print(f"contradicted by the real scheduler: {len(tally.contradictions)} (goal 0)")
    for line in tally.contradictions:
        print(f"  {line}")
    if tally.contended_workloads:
        print(f"contended workloads whose outcome was the preview's order's: {tally.contended_matched} of "
              f"{tally.contended_workloads} (not a claim: which contended pod wins is the scheduler's choice)")
    for e in errors:
        print(f"  not run: {e}")
    return 1 if tally.contradictions or errors else 0


# --- cost ----------------------------------------------------------------------------------------------------
def synthetic(n: int, batch_size: int, seed: int = 1) -> tuple[ClusterSnapshot, list[str], list[InferencePod]]:
    """N 8-GPU nodes over 3 zones (a tenth tainted dedicated=llm), two 4-GPU pods on two thirds of them, from 100
    services: a quarter with hostname anti-affinity and a zone spread constraint, a fifth pinned to a pool, a
    tenth tolerating the llm taint; CPU and memory requests on every pod."""
    rng = random.Random(seed)
    cards = (GpuResource("nvidia.com/gpu", Scheme.WHOLE, 8, 8),)
    plain = NodeScheduling((), (("cpu", 224_000), ("memory", 2**41), ("pods", 110)))
    tainted = NodeScheduling((Taint("dedicated", "llm", "NoSchedule"),), plain.allocatable)
    nodes = [Node(f"gpu-{i:05d}", True, False, "NVIDIA-H100-80GB-HBM3", 8, 8, gpu_resources=cards,
                  labels={HOST: f"gpu-{i:05d}", ZONE: f"z{i % 3}", "pool": f"p{i % 10}"},
                  scheduling=tainted if i % 10 == 0 else plain) for i in range(n)]
    specs = []
    for s in range(100):
        own = (Requirement("app", "In", (f"svc{s}",)),)
        kw: dict[str, Any] = {"requests": (("cpu", 16_000), ("memory", 128 * 2**30))}
        if s % 4 == 0:
            kw["anti_affinity"] = (PodTerm(own, HOST, frozenset({"llm"})),)
            kw["spread"] = (Spread(1, ZONE, own),)
        if s % 5 == 0:
            kw["node_selector"] = (("pool", f"p{s % 10}"),)
        if s % 10 == 0:
            kw["tolerations"] = (Toleration("dedicated", "Equal", "llm", "NoSchedule"),)
        specs.append(PodScheduling(**kw))
    pods = []
    for i in range(n):
        for j in range(2):
            if (2 * i + j) % 3 == 0:
                continue
            s = rng.randrange(100)
            pods.append(InferencePod("llm", f"p{i}-{j}", f"u{i}-{j}", nodes[i].name, gpu_request=4,
                                     gpu_units={"nvidia.com/gpu": 4}, labels={"app": f"svc{s}"}, service=f"svc{s}",
                                     owner_kind="ReplicaSet", scheduling=specs[s]))
    snap = ClusterSnapshot(0.0, "bench", nodes=tuple(nodes), pods=tuple(pods))
    batch = [nodes[i].name for i in rng.sample(range(n), batch_size)]
    moving = [p for name in batch for p in snap.pods_on(name)]
    return snap, batch, moving


def cost(args: argparse.Namespace, figures: Figures) -> None:
    snap, batch, moving = synthetic(args.nodes, args.batch)
    times = []
    for _ in range(5):
        start = time.process_time()
        result = preview(snap, batch, moving)
        times.append(time.process_time() - start)
    sure = sum(p.sure for p in result.placements)
    figures.add("preview pods moving", len(moving), "", "")
    figures.add("preview CPU", statistics.median(times), "s")
    figures.add("preview CPU best", min(times), "s")
    figures.add("preview CPU worst", max(times), "s")
    figures.add("preview sure verdicts", sure, "", "")
    print(f"cost: the preview of a {args.batch}-node batch ({len(moving)} pods) on {args.nodes} nodes "
          f"({len(snap.pods)} pods): median {statistics.median(times):.3f} s of CPU, best {min(times):.3f} s, "
          f"worst {max(times):.3f} s over 5 runs (goal < 1 s); {sure} of {len(moving)} verdicts sure")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="the first case's number (to run one again)")
    parser.add_argument("--parallel", type=int, default=8, help="cases at once")
    parser.add_argument("--cost-only", action="store_true")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=10)
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("placement", settings_of(args))
    cost(args, figures)
    if not args.cost_only:
        status = compare(args, figures)
        figures.write(args.json)
        raise SystemExit(status)
    figures.write(args.json)


if __name__ == "__main__":
    main()
