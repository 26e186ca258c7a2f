"""A fault campaign: randomized drains on the real apiserver and Prometheus under live traffic, with faults
injected, judged by an independent watcher that never asks gputui anything (benchmarks/fault_watch.py).

Each scenario (seeded): 1-3 GPU nodes to drain and 2 spare ones; 1-2 inference services of 2-3 replicas
(1 GPU each) with a PodDisruptionBudget (maxUnavailable 1), behind a Service that selects on a serving label
their Deployment does not (tests.support.workloads.served_deployment), so a drain takes each pod out of
rotation before it waits on it. tests.support.traffic's generator sends each service 0.6 sessions a second
per replica, routed by the real EndpointSlices, lasting 4 s on average and at most 15 s; the pods' engine
gauges reach Prometheus every second (`--scrape-interval`). `gputui drain NODES... --parallel 2` runs as a
real process; one fault is injected:

  none            nothing goes wrong
  scrape          one pod's scrape fails for 4-8 s (its series go stale: its count is unknown)
  prometheus      Prometheus stopped for 4-8 s
  apiserver       kube-apiserver restarted
  kill9           gputui killed with SIGKILL at a random moment, then `gputui drain --resume`
  second          a second `gputui drain` of the same node while the first runs (must be refused)
  kill-no-resume  gputui killed with SIGKILL once pods are out of rotation; nobody resumes it

Failures, each with the goal 0: a session cut (a pod gone while it still held a session: no scenario ever
chooses to cut one, deadlines are far longer than the sessions); a PDB violation (a sample in which a
service's Ready pods fall below its budget's minimum); a drain still running at the time budget whose last
line gives no reason (waiting, paused, blocked, held); a node annotated done while one of its original
pods still exists; a second drainer not refused; a pod left out of rotation with no drain owning it (no
serving label, running, and not named by the record of a node whose drain lease is live, for a second).
For kill-no-resume the pods stay out, owned by the node's record and lease until the lease expires
(LEASE_S); each pod out of rotation counts as left out when, the lease expired, `gputui check -o json` (a
process) does not report it, or when the operator's remedy, the board's uncordon (U, run as a process),
does not put it back (its serving label and its Service's ready endpoints). `--remedy kubectl` uncordons
with `kubectl uncordon` instead, a control that knows nothing of gputui's record: each such pod must count.
Printed for information, not goals: the samples in which a service had fewer pods in rotation (Ready, with
the serving label) than its budget's minimum, and the sessions no ready pod could take.

    python benchmarks/drain_faults.py [--scenarios 50] [--seed 1] [--budget 150] [--start 0] [--faults a,b]
                                     [--scrape-interval 1] [--remedy u|kubectl]

Scenario i of seed S draws from the seed S * 1000 + i and injects the fault i % 7 of the list above (of
--faults, when given; one in five times a random one): `--start i --scenarios 1` runs it again alone, with
the same nodes, services and arrivals (when things happen still depends on the machine).

Needs the control-plane binaries (scripts/build-control-plane.sh) and Debian's prometheus.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fault_watch import Result, Watcher, judge_kill_no_resume
from benchmarks.figures import Figures, json_option, settings_of
from benchmarks.harness_traffic import Harness, Output, left_out, out_of_rotation, wait
from tests.support.traffic import Durations, TrafficGenerator
from tests.support.workloads import served_deployment, service_for

FAULTS = ("none", "scrape", "prometheus", "apiserver", "kill9", "second", "kill-no-resume")
DEADLINE = "300s"  # far beyond any scenario's sessions: any cut is one nobody chose
REASONS = ("waiting", "paused", "blocked", "held", "resumed", "started", "evicted", "gone", "info")
SESSIONS = Durations(mean_s=4, max_s=15)
RATE_PER_REPLICA = 0.6  # new sessions a second: about 2.4 live per pod


def drain(h: Harness, result: Result, *args: str) -> Output:
    out = Output(h.gputui("drain", *args))
    result.outputs.append(out)
    return out


def clock(t: float | None) -> str:
    """An epoch second as the drain's lines stamp theirs (local time), to the hundredth."""
    return "-" if t is None else time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 100) % 100:02d}"


def scenario(h: Harness, index: int, seed: int, budget: float, faults: tuple[str, ...] = FAULTS) -> Result:
    rng = random.Random(seed)
    ns, pool = f"camp-{index}", f"camp{index}"
    fault = faults[index % len(faults)] if rng.random() < 0.8 else rng.choice(faults)
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
        # Owners select app; the pods also carry serving=true, which only the Service selects on.
        h.apps.create_namespaced_deployment(ns, served_deployment(svc, ns, pool, replicas, grace_s=1))
        h.core.create_namespaced_service(ns, service_for(svc, ns, {"app": svc}))
        h.policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": f"{svc}-pdb"}, "spec": {
            "maxUnavailable": 1, "selector": {"matchLabels": {"app": svc}}}})
    try:
        def all_running() -> list[Any] | None:
            ps = [p for p in h.core.list_namespaced_pod(ns).items if p.status.phase == "Running"]
            return ps if len(ps) == result.pods else None

        pods = wait(all_running, 60, "pods running")
    except RuntimeError:  # the harness, not gputui: say what the pods were doing, clean up, go on
        states = [(p.metadata.name, p.status.phase, p.spec.node_name,
                   [(c.type, c.status, (c.message or "")[:80]) for c in p.status.conditions or []])
                  for p in h.core.list_namespaced_pod(ns).items]
        result.fault, result.notes = "setup-failed", [f"pods not running in 60s: {states}"]
        cleanup(h, ns, drain_nodes + spares)
        return result
    original = {p.metadata.name: (p.metadata.uid, p.spec.node_name) for p in pods}
    gen = h.traffic(seed, SESSIONS)
    for svc, replicas in services.items():
        gen.add_route("Service", ns, svc, rate_per_s=RATE_PER_REPLICA * replicas)
    gen.start(run_for_s=budget + 120)
    watcher = Watcher(h, ns, services, result)
    procs: list[Output] = []
    try:
        # Every pod's engine gauge in Prometheus (the generator registers each pod its Services route to).
        h.prom.wait_until('count(vllm:num_requests_running{namespace="%s"})' % ns,
                          lambda v: sum(v.values()) >= result.pods, timeout=30)
        # PDB status computed (else every eviction answers 429 "still being processed", which is fine but slow)
        wait(lambda: all((h.policy.read_namespaced_pod_disruption_budget(f"{s}-pdb", ns).status.disruptions_allowed
                          or 0) >= 1 for s in services), 30, "PDB status")
        with suppress(RuntimeError):  # busy pods: each holds a session (most do within seconds)
            wait(lambda: all(gen.live(f"{ns}/{name}") for name in original), 15, "a session on every pod")
        for node in spares:
            h.core.patch_node(node, {"spec": {"unschedulable": None}})
        watcher.start()
        procs.append(drain(h, result, *drain_nodes, "--session-deadline", DEADLINE, "--parallel", "2"))
        inject(h, gen, fault, rng, ns, drain_nodes, procs, watcher, result)
        end = started + budget
        while time.monotonic() < end and any(o.proc.poll() is None for o in procs):
            time.sleep(0.5)
        for o in procs:
            if o.proc.poll() is None:
                last = o.lines[-1] if o.lines else ""
                if any(f" {word}" in last for word in REASONS) and time.monotonic() - o.last_at < 60:
                    result.stuck_with_reason += 1
                    result.notes.append(f"stuck: {last[:150]!r}")
                else:
                    result.stuck_silent += 1
                    result.notes.append(f"silent: {last!r}")
                o.proc.kill()
                o.proc.wait()
            else:
                result.exit_codes.append(o.proc.returncode)
    finally:
        watcher.stop_flag.set()
        if watcher.is_alive():
            watcher.join(5)
        if not h.cp.apiserver_running():
            h.cp.start_apiserver()
        if not h.prom.running():
            h.prom.start()
        time.sleep(1)  # the generator sees the last pods go
        report = gen.stop()
        gen.close()
    result.sessions, result.cut, result.rejected = report.started, report.cut, report.rejected
    if report.cut:  # what happened, in the generator's times and the drain's own lines (epoch seconds)
        for pod in report.cut_by_pod:
            for sess in gen.sessions(pod):
                if sess.outcome == "cut":
                    result.notes.append(f"cut: {pod}: session started {clock(sess.started)}, due "
                                        f"{clock(sess.planned_end)}, cut {clock(sess.ended)} (the pod gone)")
            lines = [line for o in result.outputs for line in o.lines if pod.split("/", 1)[1] in line]
            waits = [i for i, line in enumerate(lines) if " waiting " in line][-2:]  # the last counts it read
            result.notes.extend(f"  {line}" for i, line in enumerate(lines) if " waiting " not in line or i in waits)
    if watcher.judge_left_out.is_set():  # as the drains ended: pods out of rotation no drain owns
        for p in left_out(h.core, [ns]):
            if p.uid not in result.left_out:
                result.left_out.add(p.uid)
                result.notes.append(f"left out of rotation at the end: {p.key} on {p.node}: {p.why}")
    for node in drain_nodes:
        annotations = h.core.read_node(node).metadata.annotations or {}
        if annotations.get("gputui.io/drain-phase") == "done":
            left = [p.metadata.name for p in h.core.list_namespaced_pod(ns).items
                    if p.spec.node_name == node and original.get(p.metadata.name, ("", ""))[0] == p.metadata.uid]
            if left:
                result.wrongly_done += 1
                result.notes.append(f"{node} done with {left}")
    for o in result.outputs:
        result.notes.extend(line for line in o.lines if "error" in line.lower() and "is being drained by" not in line)
    cleanup(h, ns, drain_nodes + spares)
    result.seconds = time.monotonic() - started
    return result


def cleanup(h: Harness, ns: str, nodes: list[str]) -> None:
    h.core.delete_namespace(ns)
    for node in nodes:
        h.kubelet.remove_node(node)


def inject(h: Harness, gen: TrafficGenerator, fault: str, rng: random.Random, ns: str, nodes: list[str],
           procs: list[Output], watcher: Watcher, result: Result) -> None:
    first = procs[0]
    try:
        wait(lambda: any(" waiting " in line or " evicted " in line for line in first.lines) or first.proc.poll() is not None,
             60, "the drain under way")
    except RuntimeError:
        return
    if fault == "kill-no-resume":
        def busy_out() -> bool:  # a pod out of rotation that still holds a session: it stays out a while
            return first.proc.poll() is not None or any(gen.live(p.key) for p in out_of_rotation(h.core, [ns]))

        with suppress(RuntimeError):  # killed while pods are out of rotation
            wait(busy_out, 60, "a busy pod out of rotation")
        if first.proc.poll() is not None or not out_of_rotation(h.core, [ns]):
            result.notes.append("kill-no-resume: not injected (no pod out of rotation while the drain ran)")
            return
        watcher.judge_left_out.clear()  # from the kill on, the fault's own judgement applies
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        result.exit_codes.append(-9)
        procs.remove(first)
        judge_kill_no_resume(h, gen, ns, nodes, result)
        return
    time.sleep(rng.uniform(0.5, 4.0))
    if fault == "scrape":
        mine = [n for (pns, n) in h.exporter.pods() if pns == ns]
        victim = rng.choice(mine)
        h.exporter.break_scrape(ns, victim)
        time.sleep(rng.uniform(4, 8))
        if (ns, victim) in h.exporter.pods():
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
        procs.append(drain(h, result, "--resume"))
    elif fault == "second" and first.proc.poll() is None:
        phase = (h.core.read_node(nodes[0]).metadata.annotations or {}).get("gputui.io/drain-phase")
        if phase in ("done", "stopped", "aborted"):
            return  # the first drain is already through with that node: nothing left to own
        second = h.gputui("drain", nodes[0], "--session-deadline", DEADLINE)
        out, _ = second.communicate(timeout=60)
        if second.returncode == 1 and "is being drained by" in out:
            result.notes.append("second drainer refused: " + next(line for line in out.splitlines()
                                                                   if "is being drained by" in line)[-90:])
        elif (second.returncode == 0 or "is being drained by" not in out) and first.proc.poll() is None:
            # Refused is right; a finished first drain (nothing left to own) also lets it through.
            result.double_drains += 1
            result.notes.append(f"second drainer: exit {second.returncode}: {out.strip()[-200:]}")


COUNTS = ("sessions", "cut", "rejected", "rotation_short", "pdb_violations", "stuck_silent", "stuck_with_reason", "wrongly_done",
          "double_drains")


def record(figures: Figures, prefix: str, r: Result) -> None:
    """The campaign's counts as printed in its tables: the failures (goal 0, lower is better), then what is
    there for information (the sessions run, those no pod could take, rotation below a budget)."""
    for name in ("cut", "pdb_violations", "stuck_silent", "wrongly_done", "double_drains"):
        figures.add(prefix + name, getattr(r, name), "")
    figures.add(prefix + "left_out", len(r.left_out), "")
    for name in ("sessions", "stuck_with_reason", "rejected", "rotation_short"):
        figures.add(prefix + name, getattr(r, name), "", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0,
                        help="index of the first scenario (--start 6 --scenarios 1 runs scenario 6 of the seed again)")
    parser.add_argument("--budget", type=float, default=150.0, help="seconds a scenario may take before it is stuck")
    parser.add_argument("--scrape-interval", type=int, default=1,
                        help="Prometheus' scrape interval, s (default 1; production often scrapes every 15-30 s)")
    parser.add_argument("--remedy", choices=("u", "kubectl"), default="u",
                        help="kill-no-resume: how the node is uncordoned: as the board's U (default), or with "
                             "`kubectl uncordon` (a control: it does not put pods back, so the judgement must fail)")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"the faults to draw from, in turn (default all: {','.join(FAULTS)})")
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("drain_faults", settings_of(args))
    faults = tuple(f for f in args.faults.split(",") if f)
    if not faults or set(faults) - set(FAULTS):
        parser.error(f"--faults: some of {','.join(FAULTS)}")
    totals = Result(args.seed, "all", 0, 0)
    by_fault: dict[str, Result] = {}
    runs: dict[str, int] = {}
    t0 = time.monotonic()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        h = Harness(stack, Path(tmp), scrape_interval_s=args.scrape_interval)
        h.remedy = args.remedy
        print(f"{'#':>3} {'fault':14} {'nodes':>5} {'pods':>4} {'sess':>5} {'cut':>4} {'pdb':>4} {'stuck':>5} "
              f"{'done?':>5} {'dbl':>4} {'left':>4} {'rot<':>4} {'secs':>5}  exit codes", flush=True)
        setup_failures = 0
        for i in range(args.start, args.start + args.scenarios):
            r = scenario(h, i, args.seed * 1000 + i, args.budget, faults)
            setup_failures += r.fault == "setup-failed"
            per = by_fault.setdefault(r.fault, Result(args.seed, r.fault, 0, 0))
            runs[r.fault] = runs.get(r.fault, 0) + 1
            for agg in (totals, per):
                for name in COUNTS:
                    setattr(agg, name, getattr(agg, name) + getattr(r, name))
                agg.left_out |= r.left_out
                agg.nodes += r.nodes
                agg.pods += r.pods
            print(f"{i:>3} {r.fault:14} {r.nodes:>5} {r.pods:>4} {r.sessions:>5} {r.cut:>4} {r.pdb_violations:>4} "
                  f"{r.stuck_silent:>5} {r.wrongly_done:>5} {r.double_drains:>4} {len(r.left_out):>4} "
                  f"{r.rotation_short:>4} {r.seconds:>5.0f}  {r.exit_codes}"
                  + (f"  stuck with a reason: {r.stuck_with_reason}" if r.stuck_with_reason else ""), flush=True)
            for note in r.notes[:16]:
                print(f"      {note[:200]}", flush=True)
    print()
    print(f"{'fault':14} {'runs':>4} {'sess':>5} {'cut':>4} {'pdb':>4} {'stuck':>5} {'w/why':>5} {'done?':>5} "
          f"{'dbl':>4} {'left':>4} {'rej':>4} {'rot<':>4}")
    for fault in sorted(by_fault, key=lambda f: FAULTS.index(f) if f in FAULTS else len(FAULTS)):
        r = by_fault[fault]
        record(figures, f"{fault} ", r)
        figures.add(f"{fault} runs", runs[fault], "", "")
        print(f"{fault:14} {runs[fault]:>4} {r.sessions:>5} {r.cut:>4} {r.pdb_violations:>4} {r.stuck_silent:>5} "
              f"{r.stuck_with_reason:>5} {r.wrongly_done:>5} {r.double_drains:>4} {len(r.left_out):>4} {r.rejected:>4} "
              f"{r.rotation_short:>4}")
    print()
    record(figures, "", totals)
    figures.add("nodes", totals.nodes, "", "")
    figures.add("pods", totals.pods, "", "")
    elapsed = figures.add("seconds", time.monotonic() - t0, "s")
    figures.add("set-up failures", setup_failures, "")
    print(f"scenarios: {args.scenarios} ({totals.nodes} nodes, {totals.pods} pods, {totals.sessions} sessions) "
          f"in {elapsed:.0f}s")
    print(f"sessions cut without the operator's choice: {totals.cut}")
    print(f"PDB violations (samples below a budget's minimum): {totals.pdb_violations}")
    print(f"drains stuck without a shown reason: {totals.stuck_silent}  (stuck with a reason: {totals.stuck_with_reason})")
    print(f"nodes wrongly marked done: {totals.wrongly_done}")
    print(f"second drainers not refused: {totals.double_drains}")
    print(f"pods left out of rotation with no drain owning them: {len(totals.left_out)}")
    print(f"samples with fewer pods of a service in rotation than its budget's minimum (information, not a goal): "
          f"{totals.rotation_short}")
    print(f"sessions no ready pod could take (information, not a goal): {totals.rejected}")
    print(f"scenarios whose set-up failed (the harness, not gputui; not counted above): {setup_failures}")
    figures.write(args.json)


if __name__ == "__main__":
    main()
