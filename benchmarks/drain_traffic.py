"""Draining a busy inference node three ways, under the same live traffic, on the real harness (issue 33, item 8).

Three arms, each its own namespace and its own three nodes of the same kind (8 GPUs): a node to drain, a
spare that takes the replacements (cordoned while the pods are placed), and a node that keeps one more pod
of each service, so every Service keeps a pod serving while the drained one finishes. Each arm runs
`--services` inference services; each service is a Deployment on the node to drain plus one on the other
node (served_deployment: owners select `app` and `shard`; the pod template adds `serving: "true"`), behind
one Service, to which tests.support.traffic's generator sends sessions at `--rate` a second (Poisson),
routed by the real EndpointSlices to the ready pod with the fewest live sessions. Durations are lognormal,
mean `--mean` s, clipped at `--max` s. The engine's gauges reach Prometheus every `--scrape-interval` s.

  kubectl           `kubectl drain NODE --ignore-daemonsets` (kubectl built from k8s.io/kubernetes
                    cmd/kubectl by scripts/build-control-plane.sh); its Service selects on the serving label
  gputui-no-label   `gputui drain NODE --session-deadline D`; its Service selects only on `app`, which the
                    Deployments select on too: no label can take a pod out of rotation
  gputui-label      `gputui drain NODE --session-deadline D`; its Service selects on `app` and `serving`

After `--warmup` s of traffic (the live counts at steady state), the three drains start together and run
as real processes. A pod's engine finishes what it holds after SIGTERM until its grace period
(`--grace`, terminationGracePeriodSeconds) and is killed then, as the fake kubelet plays it; a session
still running when its pod is gone is cut (the generator's count). For each arm: the pods drained, the
sessions in flight on them at the drain's start and the longest time one of them still had to run, the
sessions that reached them after the start, the sessions cut, the drain's time (process start to exit),
its exit code. The goals for gputui with the label: 0 sessions cut, and a drain time no longer than the
longest in-flight session at its start + 2 scrape intervals + the grace period (each term printed).

    python benchmarks/drain_traffic.py [--services 3] [--rate 1.0] [--seed 1] [--quick]

`--quick` (a few minutes): 2 services, sessions of mean 10 s up to 45 s, 30 s of warm-up, a 60 s deadline,
a 10 s grace period. Needs the control-plane binaries (scripts/build-control-plane.sh) and Debian's
prometheus; about 7 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures as Record
from benchmarks.figures import json_option, settings_of
from benchmarks.harness_traffic import Harness, Output, wait
from tests.support.traffic import Durations, Session, TrafficGenerator
from tests.support.workloads import SERVING_LABEL, ready_pods, served_deployment

ARMS = ("kubectl", "gputui-no-label", "gputui-label")
TITLES = {"kubectl": "kubectl drain", "gputui-no-label": "gputui, no serving label",
          "gputui-label": "gputui, serving label"}


@dataclass
class Arm:
    name: str
    ns: str
    node: str
    services: list[str]
    pods: dict[str, str] = field(default_factory=dict)  # "ns/name" on the node at the start -> uid
    out: Output | None = None


@dataclass
class Figures:
    pods: int
    in_flight: int
    longest_left_s: float  # of the sessions in flight at the start: the longest time one still had to run
    arrived_after: int  # sessions that reached the drained pods after the drain started
    last_arrival_s: float | None  # after the start
    longest_held_s: float  # of every session the drained pods took: when the last was due to end, after the start
    cut: int
    seconds: float
    exit_code: int | None


def setup_arm(h: Harness, arm_name: str, n_services: int, grace_s: int) -> Arm:
    short = {"kubectl": "k", "gputui-no-label": "n", "gputui-label": "l"}[arm_name]
    ns = f"dt-{arm_name}"
    move, stay = f"dt-{short}-move", f"dt-{short}-stay"
    drain, spare, keep = f"dt-{short}-drain", f"dt-{short}-spare", f"dt-{short}-keep"
    for node, pool in ((drain, move), (spare, move), (keep, stay)):
        h.kubelet.add_node(node, gpus=8, labels={"gputui.test/pool": pool})
    h.core.patch_node(spare, {"spec": {"unschedulable": True}})  # the pods land on the node to drain
    h.core.create_namespace({"metadata": {"name": ns}})
    services = [f"s{i}" for i in range(n_services)]
    for svc in services:
        for shard, pool in (("m", move), ("k", stay)):
            body = served_deployment(f"{svc}-{shard}", ns, pool, 1, labels={"shard": shard}, grace_s=grace_s)
            body["spec"]["template"]["metadata"]["labels"]["app"] = svc
            body["spec"]["selector"]["matchLabels"]["app"] = svc
            h.apps.create_namespaced_deployment(ns, body)
        selector = {"app": svc} if arm_name == "gputui-no-label" else {"app": svc, SERVING_LABEL[0]: SERVING_LABEL[1]}
        h.core.create_namespaced_service(ns, {"metadata": {"name": svc}, "spec": {
            "selector": selector, "ports": [{"port": 8000}]}})
    pods = ready_pods(h.core, ns, 2 * n_services)
    on_node = {f"{ns}/{p.metadata.name}": p.metadata.uid for p in pods if p.spec.node_name == drain}
    if len(on_node) != n_services:
        raise SystemExit(f"{arm_name}: {len(on_node)} pods on {drain}, expected {n_services}")
    h.core.patch_node(spare, {"spec": {"unschedulable": None}})  # the replacements' home
    return Arm(arm_name, ns, drain, services, on_node)


def start_drain(h: Harness, arm: Arm, deadline_s: int, grace_s: int) -> Output:
    if arm.name == "kubectl":
        return Output(h.kubectl("drain", arm.node, "--ignore-daemonsets", "--delete-emptydir-data",
                                f"--timeout={deadline_s + grace_s + 120}s"))
    return Output(h.gputui("drain", arm.node, "--session-deadline", f"{deadline_s}s"))


class RotationClock(threading.Thread):
    """When each drained pod lost its serving label (left rotation), read from the API every 0.2 s."""

    def __init__(self, h: Harness, arm: Arm) -> None:
        super().__init__(daemon=True)
        self.h, self.arm = h, arm
        self.left: dict[str, float] = {}
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.wait(0.2) and len(self.left) < len(self.arm.pods):
            try:
                pods = self.h.core.list_namespaced_pod(self.arm.ns).items
            except Exception:  # noqa: BLE001 - a failed read: the next one says
                continue
            now = time.time()
            for p in pods:
                key = f"{self.arm.ns}/{p.metadata.name}"
                if key in self.arm.pods and (p.metadata.labels or {}).get(SERVING_LABEL[0]) != SERVING_LABEL[1]:
                    self.left.setdefault(key, now)


def figures(arm: Arm, gen: TrafficGenerator) -> Figures:
    assert arm.out is not None
    t0 = arm.out.started
    sessions: list[Session] = [s for pod in arm.pods for s in gen.sessions(pod)]
    in_flight = [s for s in sessions if s.started <= t0 and (s.ended is None or s.ended > t0)]
    after = [s.started - t0 for s in sessions if s.started > t0]
    seconds = (arm.out.ended or time.time()) - t0
    return Figures(len(arm.pods), len(in_flight), max((s.planned_end - t0 for s in in_flight), default=0.0),
                   len(after), max(after, default=None), max((s.planned_end - t0 for s in sessions), default=0.0),
                   sum(1 for s in sessions if s.outcome == "cut"), seconds,
                   arm.out.proc.returncode)


def _has_all(names: set[str]) -> Callable[[dict[Any, float]], bool]:
    return lambda values: names <= set(values)


def _all_gone(gen: TrafficGenerator, uids: list[str]) -> Callable[[], bool]:
    return lambda: all(gen.gone_at(u) is not None for u in uids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few minutes: shorter sessions, warm-up and deadline")
    parser.add_argument("--services", type=int, help="services per arm (default 3; quick 2)")
    parser.add_argument("--rate", type=float, default=1.0, help="new sessions a second per service (default 1.0)")
    parser.add_argument("--mean", type=float, help="mean session duration, s (default 20; quick 10)")
    parser.add_argument("--max", type=float, help="longest session, s (default 90; quick 45)")
    parser.add_argument("--warmup", type=float, help="traffic before the drains start, s (default 120; quick 30)")
    parser.add_argument("--deadline", type=int, help="gputui's --session-deadline, s (default 180; quick 60)")
    parser.add_argument("--grace", type=int, help="the pods' terminationGracePeriodSeconds (default 30; quick 10)")
    parser.add_argument("--scrape-interval", type=int, default=5, help="Prometheus' scrape interval, s (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="print every drain's whole output")
    json_option(parser)
    args = parser.parse_args()
    record = Record("drain_traffic", settings_of(args))
    quick = args.quick
    n_services = args.services or (2 if quick else 3)
    mean = args.mean or (10.0 if quick else 20.0)
    longest = args.max or (45.0 if quick else 90.0)
    warmup = args.warmup if args.warmup is not None else (30.0 if quick else 120.0)
    deadline = args.deadline or (60 if quick else 180)
    grace = args.grace if args.grace is not None else (10 if quick else 30)
    if not 1 <= n_services <= 7:
        parser.error("--services: 1 to 7 (each node has 8 GPUs)")
    t_start = time.monotonic()
    print(f"# {n_services} services per arm at {args.rate:g} sessions/s each; durations lognormal mean {mean:g} s, "
          f"up to {longest:g} s; warm-up {warmup:g} s; gputui --session-deadline {deadline}s; grace period {grace} s; "
          f"scrape interval {args.scrape_interval} s; seed {args.seed}", flush=True)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        h = Harness(stack, Path(tmp), scrape_interval_s=args.scrape_interval)
        print(f"# harness up in {record.add('harness up', time.monotonic() - t_start, 's'):.0f} s; kubectl {h.kubectl_bin}", flush=True)
        arms = [setup_arm(h, name, n_services, grace) for name in ARMS]
        gen = h.traffic(args.seed, Durations(mean_s=mean, max_s=longest))
        stack.callback(gen.close)
        for arm in arms:
            for svc in arm.services:
                gen.add_route("Service", arm.ns, svc, rate_per_s=args.rate)
        gen.start(run_for_s=warmup + deadline + grace + 300)
        for arm in arms:  # every drained pod's gauge is in Prometheus before the warm-up counts
            names = {key.split("/", 1)[1] for key in arm.pods}
            h.prom.wait_until('vllm:num_requests_running{namespace="%s"}' % arm.ns, _has_all(names), by="pod",
                              timeout=60)
        time.sleep(warmup)
        live = {arm.name: sum(gen.live(p) for p in arm.pods) for arm in arms}
        for name, n in live.items():
            record.add(f"{name} live after warm-up", n, "", "")
        print(f"# after the warm-up, live sessions on the nodes to drain: {live}", flush=True)
        clock = RotationClock(h, next(arm for arm in arms if arm.name == "gputui-label"))
        clock.start()
        for arm in arms:
            arm.out = start_drain(h, arm, deadline, grace)
        for arm in arms:
            assert arm.out is not None
            arm.out.join(deadline + grace + 180)
            if arm.out.proc.poll() is None:
                arm.out.proc.kill()
                arm.out.join(10)
        for arm in arms:  # the generator has seen every drained pod go (its sessions ended or cut then)
            try:
                wait(_all_gone(gen, list(arm.pods.values())), 30, f"{arm.name}: pods gone")
            except RuntimeError as exc:
                print(f"# {exc}", flush=True)
        report = gen.stop()
        clock.stop_flag.set()
        results = {arm.name: figures(arm, gen) for arm in arms}
        label_arm = clock.arm
        assert label_arm.out is not None
        left_after = {key.split("/", 1)[1]: at - label_arm.out.started for key, at in sorted(clock.left.items())}
        for arm in arms:
            assert arm.out is not None
            lines = arm.out.lines if args.verbose else arm.out.lines[-6:]
            print(f"\n## {TITLES[arm.name]}: {arm.node} ({'whole output' if args.verbose else 'last lines'})")
            for line in lines:
                print(f"   {line}")
    print()
    print(f"{'way':26} {'pods':>4} {'in flight':>9} {'longest left':>12} {'arrived after':>13} {'cut':>4} "
          f"{'drain s':>8} {'exit':>4}")
    for name in ARMS:
        f = results[name]
        record.add(f"{name} pods", f.pods, "", "")
        record.add(f"{name} in flight", f.in_flight, "", "")
        record.add(f"{name} longest left", f.longest_left_s, "s", "")
        record.add(f"{name} arrived after", f.arrived_after, "", "")
        record.add(f"{name} cut", f.cut, "")
        record.add(f"{name} drain", f.seconds, "s")
        record.add(f"{name} exit code", f.exit_code if f.exit_code is not None else float("nan"), "", "")
        print(f"{TITLES[name]:26} {f.pods:>4} {f.in_flight:>9} {f.longest_left_s:>11.1f}s {f.arrived_after:>13} "
              f"{f.cut:>4} {f.seconds:>8.1f} {f.exit_code if f.exit_code is not None else '-':>4}")
    print(f"(traffic: {report.started} sessions started, {report.ended} ended, {report.cut} cut, "
          f"{report.rejected} rejected, {report.unfinished} still live when it stopped)")
    record.add("sessions started", report.started, "", "")
    record.add("sessions ended", report.ended, "", "")
    record.add("sessions cut", report.cut, "")
    record.add("sessions rejected", report.rejected, "", "")
    record.add("sessions unfinished", report.unfinished, "", "")
    goal = results["gputui-label"]
    bound = record.add("gputui-label bound", goal.longest_left_s + 2 * args.scrape_interval + grace, "s", "")
    record.add("gputui-label pods left rotation", len(left_after), "", "")
    record.add("gputui-label first left rotation", min(left_after.values(), default=float("nan")), "s")
    record.add("gputui-label last left rotation", max(left_after.values(), default=float("nan")), "s")
    print()
    print("goals for gputui with a serving label:")
    print(f"  sessions cut: {goal.cut} (goal 0): {'met' if goal.cut == 0 else 'NOT met'}")
    print(f"  drain time {goal.seconds:.1f} s <= longest in-flight session at drain start {goal.longest_left_s:.1f} s "
          f"+ 2 scrape intervals 2 x {args.scrape_interval} s + grace period {grace} s = {bound:.1f} s: "
          f"{'met' if goal.seconds <= bound else 'NOT met'}")
    print("  its pods left rotation (lost the serving label) after: "
          + (", ".join(f"{name} {after:.1f} s" for name, after in left_after.items()) or "none did"))
    if goal.arrived_after:
        held = record.add("gputui-label bound from the last session taken", goal.longest_held_s + 2 * args.scrape_interval + grace, "s", "")
        record.add("gputui-label last arrival", goal.last_arrival_s if goal.last_arrival_s is not None else float("nan"), "s")
        print(f"  ({goal.arrived_after} sessions reached its pods after the drain started, the last "
              f"{goal.last_arrival_s:.1f} s after, before they left rotation; the last session they took was due "
              f"to end {goal.longest_held_s:.1f} s after the start: counted from it, the bound is {held:.1f} s, "
              f"{'met' if goal.seconds <= held else 'NOT met'})")
    print(f"\ntotal {record.add('total', time.monotonic() - t_start, 's'):.0f} s")
    record.write(args.json)


if __name__ == "__main__":
    main()
