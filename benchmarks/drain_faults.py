"""A fault campaign: randomized drains on the real apiserver and Prometheus, with faults injected, judged
by an independent watcher that never asks gputui anything.

Each scenario (seeded): 1-3 GPU nodes to drain and 2 spare ones; 1-2 inference services of 2-3
replicas (1 GPU each) with a PodDisruptionBudget (maxUnavailable 1); each pod starts with 0-6 live
sessions that end one by one (as conversations finish); new pods export a session series as a real
engine would. `gputui drain NODES... --parallel 2` runs as a real process; one fault is injected:

  none        nothing goes wrong
  scrape      one pod's scrape fails for 4-8 s (its series go stale: its count is unknown)
  prometheus  Prometheus stopped for 4-8 s
  apiserver   kube-apiserver restarted
  kill9       gputui killed with SIGKILL at a random moment, then `gputui drain --resume`
  second      a second `gputui drain` of the same node while the first runs (must be refused)

The watcher samples every 0.25 s, from the API and the exporter's ground truth: a pod that starts
deleting (or vanishes) while it still holds live sessions is a session cut (no scenario ever chooses to
cut one: deadlines are far longer than the sessions); a service whose Ready pods fall below its
budget's minimum is a PDB violation; a drain still running at the time budget whose last line gives no
reason (waiting, paused, blocked, held) is stuck without a shown reason; a node annotated done while one
of its original pods still exists is wrongly marked done. A second drainer that is not refused counts
as a double drain.

    python benchmarks/drain_faults.py [--scenarios 50] [--seed 1] [--budget 150]

Needs the control-plane binaries (scripts/build-control-plane.sh) and Debian's prometheus.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client  # noqa: E402

from tests.support.control_plane import ControlPlane  # noqa: E402
from tests.support.exporters import InferenceExporter  # noqa: E402
from tests.support.fake_kubelet import FakeKubelet  # noqa: E402
from tests.support.prom import PrometheusServer, inference_scrape_config  # noqa: E402

FAULTS = ("none", "scrape", "prometheus", "apiserver", "kill9", "second")
DEADLINE = "300s"  # far beyond any scenario's sessions: any cut is one nobody chose
REASONS = ("waiting", "paused", "blocked", "held", "resumed", "started", "evicted", "gone")


@dataclass
class Result:
    seed: int
    fault: str
    nodes: int
    pods: int
    cut: int = 0
    pdb_violations: int = 0
    stuck_silent: int = 0
    stuck_with_reason: int = 0
    wrongly_done: int = 0
    double_drains: int = 0
    exit_codes: list[int] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


class Harness:
    def __init__(self, stack: ExitStack, workdir: Path) -> None:
        self.cp = stack.enter_context(ControlPlane())
        self.kubelet = FakeKubelet(self.cp.kubeconfigs["kubelet"], heartbeat_interval=10).start()
        stack.callback(self.kubelet.stop)
        if not self.kubelet.synced.wait(30):
            raise SystemExit(f"fake kubelet never synced: {self.kubelet.errors}")
        self.exporter = InferenceExporter(workdir / "targets.json")
        stack.callback(self.exporter.close)
        self.prom = PrometheusServer([inference_scrape_config(self.exporter.sd_file)])
        self.exporter.add_pod("campaign", "warm-up", running=0)  # Prometheus is ready once a target is up
        self.prom.start()
        stack.callback(self.prom.close)
        api = self.cp.harness_client()
        self.core, self.apps, self.policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
        self.home = workdir / "home"

    def gputui(self, *args: str) -> subprocess.Popen:
        env = dict(os.environ, HOME=str(self.home), XDG_STATE_HOME=str(self.home / "s"),
                   XDG_CONFIG_HOME=str(self.home / "c"))
        return subprocess.Popen([sys.executable, "-u", "-m", "gputui", "drain", "--kubeconfig",
                                 str(self.cp.admin_kubeconfig), "--prometheus", self.prom.url, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


class Output:
    """A process's lines, with the time of the last one, read in a thread."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.lines, self.last_at = proc, [], time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line.rstrip())
            self.last_at = time.monotonic()


class Watcher(threading.Thread):
    """Samples the API and the exporter's ground truth; knows nothing of gputui."""

    def __init__(self, h: Harness, ns: str, services: dict[str, int], result: Result) -> None:
        super().__init__(daemon=True)
        self.h, self.ns, self.services, self.result = h, ns, services, result
        self.stop_flag = threading.Event()
        self.deleting: set[str] = set()
        self.seen: dict[str, str] = {}  # name -> uid

    def sessions(self, name: str) -> int:
        pod = self.h.exporter._pods.get((self.ns, name))
        return int(pod.running + pod.waiting) if pod is not None else 0

    def run(self) -> None:
        while not self.stop_flag.is_set():
            try:
                pods = self.h.core.list_namespaced_pod(self.ns).items
            except Exception:
                time.sleep(0.25)  # the apiserver is being restarted: nothing to sample
                continue
            names = set()
            for p in pods:
                name = p.metadata.name
                names.add(name)
                if name not in self.seen:
                    self.seen[name] = p.metadata.uid
                    if (self.ns, name) not in self.h.exporter._pods:  # a new replica exports its series
                        self.h.exporter.add_pod(self.ns, name, running=0)
                if p.metadata.deletion_timestamp and name not in self.deleting:
                    self.deleting.add(name)
                    self.result.cut += self.sessions(name)
            for name in list(self.seen):
                if name not in names and name not in self.deleting:
                    self.deleting.add(name)
                    self.result.cut += self.sessions(name)
            for svc, replicas in self.services.items():
                ready = sum(1 for p in pods if p.metadata.labels.get("app") == svc and not p.metadata.deletion_timestamp
                            and p.status.phase == "Running"
                            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []))
                if ready < replicas - 1:
                    self.result.pdb_violations += 1
            time.sleep(0.25)


class Decay(threading.Thread):
    """Conversations end one by one: every 1-2 s one live session of a random pod finishes."""

    def __init__(self, h: Harness, ns: str, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.h, self.ns, self.rng = h, ns, rng
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.wait(self.rng.uniform(1.0, 2.0)):
            busy = [(ns, n) for (ns, n), p in list(self.h.exporter._pods.items()) if ns == self.ns and p.running > 0]
            if busy:
                ns, name = self.rng.choice(busy)
                self.h.exporter.set(ns, name, running=self.h.exporter._pods[(ns, name)].running - 1)


def wait(fn, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.25)
    raise RuntimeError(f"{what} not reached in {timeout}s")


def scenario(h: Harness, index: int, seed: int, budget: float) -> Result:
    rng = random.Random(seed)
    ns, pool = f"camp-{index}", f"camp{index}"
    fault = FAULTS[index % len(FAULTS)] if rng.random() < 0.8 else rng.choice(FAULTS)
    n_drain = rng.choice([1, 2, 3])
    drain_nodes = [f"{pool}-d{i}" for i in range(n_drain)]
    spares = [f"{pool}-s{i}" for i in range(2)]
    services = {f"svc{i}": rng.choice([2, 3]) for i in range(rng.choice([1, 2]))}
    result = Result(seed, fault, n_drain, sum(services.values()))
    started = time.monotonic()
    h.core.create_namespace({"metadata": {"name": ns}})
    for node in drain_nodes + spares:  # 8 GPUs: room for every replica (at most 6) on one node
        h.kubelet.add_node(node, gpus=8, labels={"gputui.test/pool": pool})
    for node in spares:  # the pods land on the nodes to drain; the spares take them afterwards
        h.core.patch_node(node, {"spec": {"unschedulable": True}})
    for svc, replicas in services.items():
        labels = {"app": svc}
        h.apps.create_namespaced_deployment(ns, {
            "metadata": {"name": svc}, "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {
                    "nodeSelector": {"gputui.test/pool": pool}, "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.9.0",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
        h.policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": f"{svc}-pdb"}, "spec": {
            "maxUnavailable": 1, "selector": {"matchLabels": labels}}})
    try:
        pods = wait(lambda: (ps := [p for p in h.core.list_namespaced_pod(ns).items if p.status.phase == "Running"])
                    and len(ps) == result.pods and ps, 60, "pods running")
    except RuntimeError:  # the harness, not gputui: say what the pods were doing, clean up, go on
        states = [(p.metadata.name, p.status.phase, p.spec.node_name,
                   [(c.type, c.status, (c.message or "")[:80]) for c in p.status.conditions or []])
                  for p in h.core.list_namespaced_pod(ns).items]
        result.fault, result.notes = "setup-failed", [f"pods not running in 60s: {states}"]
        cleanup(h, ns, drain_nodes + spares)
        return result
    original = {p.metadata.name: (p.metadata.uid, p.spec.node_name) for p in pods}
    for name in original:
        h.exporter.add_pod(ns, name, running=rng.randint(0, 6))
    h.prom.wait_until('count(vllm:num_requests_running{namespace="%s"})' % ns,
                      lambda v: sum(v.values()) >= result.pods, timeout=30)
    # PDB status computed (else every eviction answers 429 "still being processed", which is fine but slow)
    wait(lambda: all((h.policy.read_namespaced_pod_disruption_budget(f"{s}-pdb", ns).status.disruptions_allowed or 0)
                     >= 1 for s in services), 30, "PDB status")
    for node in spares:
        h.core.patch_node(node, {"spec": {"unschedulable": None}})
    watcher, decay = Watcher(h, ns, services, result), Decay(h, ns, rng)
    watcher.start()
    decay.start()
    procs = [Output(h.gputui(*drain_nodes, "--session-deadline", DEADLINE, "--parallel", "2"))]
    try:
        inject(h, fault, rng, ns, drain_nodes, procs, result)
        end = started + budget
        while time.monotonic() < end and any(o.proc.poll() is None for o in procs):
            time.sleep(0.5)
        for o in procs:
            if o.proc.poll() is None:
                last = o.lines[-1] if o.lines else ""
                if any(f" {word}" in last for word in REASONS) and time.monotonic() - o.last_at < 60:
                    result.stuck_with_reason += 1
                else:
                    result.stuck_silent += 1
                    result.notes.append(f"silent: {last!r}")
                o.proc.kill()
                o.proc.wait()
            else:
                result.exit_codes.append(o.proc.returncode)
    finally:
        decay.stop_flag.set()
        watcher.stop_flag.set()
        watcher.join(5)
    if not h.cp.apiserver_running():
        h.cp.start_apiserver()
    if not h.prom.running():
        h.prom.start()
    for node in drain_nodes:
        annotations = h.core.read_node(node).metadata.annotations or {}
        if annotations.get("gputui.io/drain-phase") == "done":
            left = [p.metadata.name for p in h.core.list_namespaced_pod(ns).items
                    if p.spec.node_name == node and original.get(p.metadata.name, ("", ""))[0] == p.metadata.uid]
            if left:
                result.wrongly_done += 1
                result.notes.append(f"{node} done with {left}")
    for o in procs:
        result.notes.extend(line for line in o.lines if "error" in line.lower() and "is being drained by" not in line)
    cleanup(h, ns, drain_nodes + spares)
    result.seconds = time.monotonic() - started
    return result


def cleanup(h: Harness, ns: str, nodes: list[str]) -> None:
    for (pns, name) in list(h.exporter._pods):
        if pns == ns:
            h.exporter.remove_pod(pns, name)
    h.core.delete_namespace(ns)
    for node in nodes:
        h.kubelet.remove_node(node)


def inject(h: Harness, fault: str, rng: random.Random, ns: str, nodes: list[str], procs: list[Output],
           result: Result) -> None:
    first = procs[0]
    try:
        wait(lambda: any(" waiting " in line or " evicted " in line for line in first.lines) or first.proc.poll() is not None,
             60, "the drain under way")
    except RuntimeError:
        return
    time.sleep(rng.uniform(0.5, 4.0))
    if fault == "scrape":
        mine = [n for (pns, n) in list(h.exporter._pods) if pns == ns]
        victim = rng.choice(mine)
        h.exporter.break_scrape(ns, victim)
        time.sleep(rng.uniform(4, 8))
        if (ns, victim) in h.exporter._pods:
            h.exporter.break_scrape(ns, victim, broken=False)
    elif fault == "prometheus":
        h.prom.stop()
        time.sleep(rng.uniform(4, 8))
        h.prom.start()
    elif fault == "apiserver":
        h.cp.restart_apiserver()
    elif fault == "kill9" and first.proc.poll() is None:
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        result.exit_codes.append(-9)
        procs.remove(first)
        time.sleep(rng.uniform(1, 3))
        procs.append(Output(h.gputui("--resume")))
    elif fault == "second" and first.proc.poll() is None:
        phase = (h.core.read_node(nodes[0]).metadata.annotations or {}).get("gputui.io/drain-phase")
        if phase in ("done", "stopped", "aborted"):
            return  # the first drain is already through with that node: nothing left to own
        second = h.gputui(nodes[0], "--session-deadline", DEADLINE)
        out, _ = second.communicate(timeout=60)
        if second.returncode == 1 and "is being drained by" in out:
            result.notes.append("second drainer refused: " + next(line for line in out.splitlines()
                                                                   if "is being drained by" in line)[-90:])
        elif second.returncode == 0 or "is being drained by" not in out:
            # Refused is right; a finished first drain (nothing left to own) also lets it through.
            if first.proc.poll() is None:
                result.double_drains += 1
                result.notes.append(f"second drainer: exit {second.returncode}: {out.strip()[-200:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=float, default=150.0, help="seconds a scenario may take before it is stuck")
    args = parser.parse_args()
    totals = Result(args.seed, "all", 0, 0)
    t0 = time.monotonic()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        h = Harness(stack, Path(tmp))
        print(f"{'#':>3} {'fault':10} {'nodes':>5} {'pods':>4} {'cut':>4} {'pdb':>4} {'stuck':>5} {'done?':>5} "
              f"{'dbl':>4} {'secs':>5}  exit codes", flush=True)
        setup_failures = 0
        for i in range(args.scenarios):
            r = scenario(h, i, args.seed * 1000 + i, args.budget)
            setup_failures += r.fault == "setup-failed"
            for name in ("cut", "pdb_violations", "stuck_silent", "stuck_with_reason", "wrongly_done", "double_drains"):
                setattr(totals, name, getattr(totals, name) + getattr(r, name))
            totals.nodes += r.nodes
            totals.pods += r.pods
            print(f"{i:>3} {r.fault:10} {r.nodes:>5} {r.pods:>4} {r.cut:>4} {r.pdb_violations:>4} "
                  f"{r.stuck_silent:>5} {r.wrongly_done:>5} {r.double_drains:>4} {r.seconds:>5.0f}  {r.exit_codes}"
                  + (f"  stuck with a reason: {r.stuck_with_reason}" if r.stuck_with_reason else ""), flush=True)
            for note in r.notes[:3]:
                print(f"      {note[:160]}", flush=True)
    print()
    print(f"scenarios: {args.scenarios} ({totals.nodes} nodes, {totals.pods} pods) in {time.monotonic() - t0:.0f}s")
    print(f"sessions cut without the operator's choice: {totals.cut}")
    print(f"PDB violations (samples below a budget's minimum): {totals.pdb_violations}")
    print(f"drains stuck without a shown reason: {totals.stuck_silent}  (stuck with a reason: {totals.stuck_with_reason})")
    print(f"nodes wrongly marked done: {totals.wrongly_done}")
    print(f"second drainers not refused: {totals.double_drains}")
    print(f"scenarios whose set-up failed (the harness, not gputui; not counted above): {setup_failures}")


if __name__ == "__main__":
    main()
