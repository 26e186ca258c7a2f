"""`gputui check` on a large fleet, two ways.

Synthetic (default, no servers): how long the checks take on one snapshot, against the reference of
building that snapshot's pod indexes and alerts once (what every refresh of the dashboard already pays).
N GPU nodes of 8 GPUs in 4 pools, a 1-GPU inference pod per GPU in S services with two versions, a PDB
per service, a few planted problems (XIDs, a drifted driver, Pending pods). Reported as CPU time of this
thread (time.thread_time), median of R runs (default 5).

Real (--real): the issue's acceptance, "`gputui check` runs in under 5 s on a 2,000-node fleet", end to
end. benchmarks/scale.py's fleet (a real kube-apiserver with N nodes and N 8-GPU pods, DCGM and session
series in a real Prometheus) is built once; then, wall clock, median of R runs (default 3):
  - `python -m gputui check -o json --kubeconfig ... --prometheus ...` in a subprocess, as a user runs it
  - the same in a child process split into phases: connect (live_backend), first snapshot, the check facts
    (memory growth, alert rules, grants beyond needs), the checks
against `kubectl get nodes,pods -A -o json` on the same fleet. Everything is stopped at the end.

    python benchmarks/check.py [--nodes 2000] [--services 50] [--runs 5]
    python benchmarks/check.py --real [--nodes 2000] [--runs 3]

--real needs the control-plane binaries (scripts/build-control-plane.sh) and Debian's prometheus;
a 2,000-node run takes about a minute here (2 cores), most of it building the fleet.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.checks.context import CheckContext
from gputui.checks.rules import run_checks
from gputui.policy.health import fleet_alerts
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.model import Budget, Gpu, InferencePod, Node, PodProbes

POOLS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-H200")
TARGET_S = 5.0  # the acceptance for --real


def fleet(nodes: int, services: int) -> ClusterSnapshot:
    node_list, pods, budgets = [], [], []
    for i in range(nodes):
        name = f"gpu-{i:05d}"
        gpus = tuple(Gpu(g, f"{name}-{g}", util_pct=float((i + g) % 100), temp_c=40.0 + g,
                         xid=79 if i % 997 == 0 and g == 3 else 0) for g in range(8))
        node_list.append(Node(name, ready=True, unschedulable=False, gpu_product=POOLS[i % 4], gpu_capacity=8,
                              gpu_allocatable=8, driver_version="535.1" if i % 1499 == 7 else "550.127.05",
                              cuda_version="12.4", gpus=gpus, labels={"topology.kubernetes.io/zone": f"z{i % 3}"}))
        for g in range(8):
            svc = (i * 8 + g) % services
            pods.append(InferencePod("llm", f"s{svc}-{i}-{g}", f"u{i}-{g}", name, gpu_request=1, service=f"s{svc}",
                                     version="v1" if g % 2 else "v2", labels={"app": f"s{svc}"}, session_signal=True,
                                     termination_grace_s=60,
                                     probes=PodProbes(True, False, 900, True)))
    pods += [InferencePod("llm", f"pending-{j}", f"p{j}", "", phase="Pending", gpu_request=8) for j in range(5)]
    budgets = [Budget("llm", f"s{s}-pdb", {"app": f"s{s}"}, max_unavailable="1", disruptions_allowed=1,
                      current_healthy=10, desired_healthy=9, expected_pods=10) for s in range(services)]
    sources = (SourceStatus("API", 1.0), SourceStatus("metrics", 1.0))
    counts = {(p.namespace, p.name): int(p.name.rsplit("-", 1)[1]) for p in pods if p.session_signal}
    return ClusterSnapshot(1.0, "bench", tuple(node_list), tuple(pods), budgets=tuple(budgets), sources=sources,
                           session_counts=counts)


def cpu(fn: Callable[[], object]) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def synthetic(nodes: int, services: int, runs: int, record: Figures) -> None:
    snap = fleet(nodes, services)
    pods = len(snap.pods)

    def reference() -> None:  # what a dashboard refresh pays anyway: the snapshot's indexes and alerts
        again = ClusterSnapshot(snap.taken_at, snap.context, snap.nodes, snap.pods, budgets=snap.budgets,
                                sources=snap.sources)
        fleet_alerts(again, 85.0)

    ref = statistics.median(cpu(reference) for _ in range(runs))
    checks = statistics.median(cpu(lambda: run_checks(CheckContext(snap, read_only=True))) for _ in range(runs))
    failed = [r.id for r in run_checks(CheckContext(snap, read_only=True)) if r.status.value == "fail"]
    record.add("pods", pods, "", "")
    record.add("reference (indexes + alerts)", ref * 1000, "ms")
    record.add("check (all checks)", checks * 1000, "ms")
    record.add("check/reference", checks / ref, "x")
    record.add("failing checks", len(failed), "", "")  # as planted: a change here is a change in the checks
    print(f"{nodes} nodes, {pods} pods, {services} services ({runs} runs, CPU time)")
    print(f"reference (indexes + alerts): {ref * 1000:8.1f} ms")
    print(f"gputui check (all checks):    {checks * 1000:8.1f} ms   ratio {checks / ref:.2f}x   goal < 5 s")
    print(f"failing, as planted: {', '.join(failed)}")


def check_argv(fleet: dict) -> list[str]:
    # As a user types it. Not --read-only: the access reviews a default run sends are part of its cost.
    return ["check", "-o", "json", "--kubeconfig", fleet["kubeconfig"], "--prometheus", fleet["prometheus"]]


def isolated_env(config_home: str) -> dict[str, str]:
    """This environment without GPUTUI_* variables and with an empty config directory: a developer's own
    config.yaml or GPUTUI_DCGM_INTERVAL must not change what is measured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI_")}
    return {**env, "XDG_CONFIG_HOME": config_home}


def time_cli(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], dict]:
    """Wall time of each run of `python -m gputui <argv>` (interpreter start and imports included, as a user
    pays them), and the last run's JSON."""
    times, out = [], {}
    for _ in range(runs):
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "gputui", *argv], capture_output=True, text=True, env=env,
                              timeout=600)
        times.append(time.monotonic() - start)
        # 1 only says a check failed (gputui/cli/common.py); 2 is bad input or no cluster, other codes a crash.
        if proc.returncode not in (0, 1) or "Traceback" in proc.stderr:
            raise RuntimeError(f"gputui check exited {proc.returncode}:\n{proc.stderr[-2000:]}")
        out = json.loads(proc.stdout)
        out["exit_code"] = proc.returncode
    return times, out


def in_process(argv: list[str], env: dict[str, str], runs: int) -> dict:
    """What gputui/cli/check.py does, timed by phase. Runs in a spawned child: the benchmark's own process
    serves the exporters Prometheus scrapes, and their threads would share gputui's GIL here."""
    os.environ.clear()
    os.environ.update(env)
    from gputui.backends.kube_backend import live_backend
    from gputui.cli.parser import build_parser, settings_from

    settings = settings_from(build_parser().parse_args(argv))  # the CLI's own flags, config and env handling
    from gputui.checks.context import context_for
    from gputui.vocabulary.check_facts import DEFAULT_WINDOW_S

    phases: dict[str, list[float]] = {"connect": [], "snapshot": [], "facts": [], "checks": []}
    for _ in range(runs):
        t0 = time.monotonic()
        backend = live_backend(settings)  # kubeconfig, API discovery, access reviews, whoami
        t1 = time.monotonic()
        try:
            snap = backend.reader.snapshot()  # Kubernetes lists + Prometheus (the first DCGM read is fleet-wide)
            t2 = time.monotonic()
            facts = backend.check_facts(DEFAULT_WINDOW_S)  # memory growth, alert rules, grants beyond needs
            t3 = time.monotonic()
            results = run_checks(context_for(snap, settings, backend, facts))
            t4 = time.monotonic()
        finally:
            backend.close()
        for name, seconds in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            phases[name].append(seconds)
    # A fast but incomplete snapshot (metrics timed out) would flatter gputui: say what was read.
    return {"phases": {k: statistics.median(v) for k, v in phases.items()}, "nodes": len(snap.nodes),
            "pods": len(snap.pods), "gpus": sum(s.count for s in snap.summaries.values()),
            "sources": ", ".join(f"{s.name} {s.error or 'ok'}" for s in snap.sources),
            "counts": dict(Counter(r.status.value for r in results))}


def real(nodes: int, runs: int, record: Figures) -> None:
    # Imported here: the synthetic mode needs neither servers nor the test harness.
    import scale  # benchmarks/scale.py, beside this file (sys.path[0] when run as a script)

    with ExitStack() as stack:
        built = scale.build_fleet(stack, nodes)  # also times kubectl on it, median of 3
        env = isolated_env(stack.enter_context(tempfile.TemporaryDirectory(prefix="gputui-bench-")))
        argv = check_argv(built)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            inner = pool.apply(in_process, (argv, env, runs))
        cli_times, out = time_cli(argv, env, runs)
    # Servers are stopped from here on; only printing is left.
    kubectl, cli = built["kubectl_get_s"], statistics.median(cli_times)
    ph = inner["phases"]
    total = sum(ph.values())
    verdict = "under" if cli < TARGET_S else "OVER"
    record.add("kubectl get nodes,pods", kubectl, "s")
    record.add("check CLI", cli, "s")
    record.add("check CLI/kubectl", cli / kubectl, "x")
    for phase in ("connect", "snapshot", "facts", "checks"):
        record.add(f"in process: {phase}", ph[phase], "s")
    record.add("in process total", total, "s")
    record.add("in process/kubectl", total / kubectl, "x")
    record.add("start-up, imports, output", cli - total, "s")
    record.add("nodes read", inner["nodes"], "", "")
    record.add("pods read", inner["pods"], "", "")
    record.add("GPUs with metrics", inner["gpus"], "", "")
    print(f"{nodes} nodes, {nodes} pods ({runs} runs, wall clock, medians)")
    print(f"kubectl get nodes,pods -A -o json:   {kubectl:5.2f} s (reference)")
    print(f"gputui check (CLI, subprocess):      {cli:5.2f} s ({cli / kubectl:.2f}x kubectl) -- {verdict} the "
          f"{TARGET_S:g} s target; runs {', '.join(f'{t:.2f}' for t in cli_times)}")
    print(f"  in process: connect {ph['connect']:.2f} s + first snapshot {ph['snapshot']:.2f} s + facts "
          f"{ph['facts']:.2f} s + checks "
          f"{ph['checks']:.3f} s = {total:.2f} s ({total / kubectl:.2f}x kubectl)")
    print(f"  start-up, imports, output (CLI - in process): {cli - total:.2f} s")
    print(f"  snapshot read: {inner['nodes']} nodes, {inner['pods']} pods, {inner['gpus']} GPUs with metrics; "
          f"sources: {inner['sources']}")
    counts = out["counts"]
    record.add("checks run", len(out["checks"]), "", "")
    for status, n in counts.items():
        record.add(f"checks {status}", n, "", "")
    record.add("exit code", out["exit_code"], "", "")
    print(f"results: {len(out['checks'])} checks: " + ", ".join(f"{v} {k}" for k, v in counts.items())
          + f"; exit code {out['exit_code']}")
    for status in ("fail", "unknown"):  # what the fleet planted (a drifted driver) and what could not be read
        named = [f"{c['id']} ({c['summary'][:100]})" for c in out["checks"] if c["status"] == status]
        if named:
            print(f"  {status}: {'; '.join(named)}")
    if {k: v for k, v in counts.items() if v} != inner["counts"]:
        # The phases mirror gputui/cli/check.py by hand: a difference means that mirror needs updating.
        print(f"  in process the counts were {inner['counts']}: in_process() no longer mirrors gputui/cli/check.py")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real", action="store_true", help="time `gputui check` end to end on real servers")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--services", type=int, default=50, help="synthetic mode only")
    parser.add_argument("--runs", type=int, help="runs per measurement (default 5 synthetic, 3 real)")
    json_option(parser)
    args = parser.parse_args()
    record = Figures("check", settings_of(args))
    if args.real:
        real(args.nodes, args.runs or 3, record)
    else:
        synthetic(args.nodes, args.services, args.runs or 5, record)
    record.write(args.json)


if __name__ == "__main__":
    main()
