"""The fault campaign's judges (benchmarks/drain_faults.py), which never ask gputui anything but its own
check: a watcher that samples the API while a drain runs, and the judgement of a gputui killed while it held
pods out of rotation and not resumed.

The watcher counts a PDB violation for every sample in which a service's Ready pods fall below its budget's
minimum (and, for information, each sample in which its pods in rotation do), and a pod left out of rotation with no drain owning it (benchmarks.harness_traffic.out_of_rotation:
no serving label, not named by a live drain's record) once it stays so across two samples a second apart
(a drain's record and label writes are two requests: one sample can fall between them). Sessions cut are
the traffic generator's: sessions still running when their pod was gone.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field

from benchmarks.harness_traffic import Harness, Output, lease_renewed, out_of_rotation, wait
from gputui.ops.drain.lease import LEASE_S
from tests.support.traffic import TrafficGenerator
from tests.support.workloads import SERVING_LABEL

CHECK_ID = "pods.out_of_rotation"
SETTLE_S = 1.0  # a pod unowned this long (two samples) is left out, not caught between two writes


@dataclass
class Result:
    seed: int
    fault: str
    nodes: int
    pods: int
    sessions: int = 0  # started by the traffic generator
    cut: int = 0
    rejected: int = 0  # sessions no ready pod could take (information: a Service with nothing serving)
    rotation_short: int = 0  # samples with fewer pods of a service in rotation than its PDB's minimum (information)
    pdb_violations: int = 0
    stuck_silent: int = 0
    stuck_with_reason: int = 0
    wrongly_done: int = 0
    double_drains: int = 0
    left_out: set[str] = field(default_factory=set)  # uids of pods left out of rotation with no drain owning them
    exit_codes: list[int] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)  # every gputui drain the scenario ran, killed ones too


class Watcher(threading.Thread):
    """Samples the API every 0.25 s (out of rotation: every second); knows nothing of gputui."""

    def __init__(self, h: Harness, ns: str, services: dict[str, int], result: Result) -> None:
        super().__init__(daemon=True)
        self.h, self.ns, self.services, self.result = h, ns, services, result
        self.stop_flag = threading.Event()
        # Cleared when the campaign kills gputui for good: from then on the fault's own judgement applies.
        self.judge_left_out = threading.Event()
        self.judge_left_out.set()
        self.unowned_since: dict[str, float] = {}
        self._last_rotation = 0.0

    def run(self) -> None:
        while not self.stop_flag.is_set():
            with suppress(Exception):  # the apiserver is being restarted: nothing to sample
                self._sample()
            time.sleep(0.25)

    def _sample(self) -> None:
        pods = self.h.core.list_namespaced_pod(self.ns).items
        for svc, replicas in self.services.items():
            ready = [p for p in pods if (p.metadata.labels or {}).get("app") == svc
                     and not p.metadata.deletion_timestamp and p.status.phase == "Running"
                     and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
            if len(ready) < replicas - 1:
                self.result.pdb_violations += 1
            # In rotation: Ready and selected by the Service (the serving label). A pod out of rotation counts
            # for its PDB (it stays Ready); nobody but the drain counts the serving capacity it took away.
            if sum(1 for p in ready if p.metadata.labels.get(SERVING_LABEL[0]) == SERVING_LABEL[1]) < replicas - 1:
                self.result.rotation_short += 1
        now = time.monotonic()
        if now - self._last_rotation < 1.0 or not self.judge_left_out.is_set():
            return
        self._last_rotation = now
        unowned = {p.uid: p for p in out_of_rotation(self.h.core, [self.ns]) if not p.owned}
        for uid in list(self.unowned_since):
            if uid not in unowned:
                del self.unowned_since[uid]
        for uid, p in unowned.items():
            since = self.unowned_since.setdefault(uid, now)
            if now - since >= SETTLE_S and uid not in self.result.left_out and self.judge_left_out.is_set():
                self.result.left_out.add(uid)
                self.result.notes.append(f"left out of rotation: {p.key} on {p.node}: {p.why}")


def reported_by_check(h: Harness) -> tuple[set[str], str]:
    """The pods `gputui check --only pods -o json` (a process) names as out of rotation with no drain that owns
    them, and its status ("" when it did not run or said nothing of them)."""
    out = h.gputui_run("check", "--only", "pods", "-o", "json")
    try:
        checks = {c["id"]: c for c in json.loads(out.stdout)["checks"]}
    except (ValueError, KeyError, TypeError):
        return set(), f"unreadable (exit {out.returncode}): {(out.stdout + out.stderr).strip()[-200:]}"
    found = checks.get(CHECK_ID)
    if found is None:
        return set(), f"no {CHECK_ID} in its answer"
    return {obj.split(" on ", 1)[0] for obj in found.get("objects") or []}, str(found.get("status"))


def judge_kill_no_resume(h: Harness, gen: TrafficGenerator, ns: str, nodes: list[str], result: Result) -> None:
    """gputui was killed with pods out of rotation and nobody resumes it. They stay out, owned by the node's
    record and its lease until the lease expires (LEASE_S after its last renewal). A pod fails when, the lease
    expired, `gputui check` does not report it; or when the operator's remedy, the board's uncordon (U, on each
    node), does not put it back (its serving label, then its Service's ready endpoints)."""
    out = out_of_rotation(h.core, [ns])
    if not out:
        result.notes.append("kill-no-resume: no pod out of rotation after the kill")
        return
    owned_at_kill = sum(p.owned for p in out)
    early, status = reported_by_check(h)  # the lease is live: a report now would be a false alarm (noted)
    if early & {p.key for p in out if p.owned}:
        result.notes.append(f"kill-no-resume: check reported pods a live lease owns ({status}): {sorted(early)}")
    renewed = [r for n in nodes if (r := lease_renewed(h.core.read_node(n).metadata.annotations or {}))]
    expires = max(renewed, default=time.time()) + LEASE_S + 2
    time.sleep(max(0.0, expires - time.time()))
    out = out_of_rotation(h.core, [ns])
    unowned = [p for p in out if not p.owned]
    reported, status = reported_by_check(h)
    missed = [p for p in unowned if p.key not in reported]
    for p in missed:
        result.left_out.add(p.uid)
        result.notes.append(f"kill-no-resume: gputui check ({status}) does not report {p.key}: {p.why}")
    result.notes.append(f"kill-no-resume: {len(out)} pods out of rotation ({owned_at_kill} owned at the kill, "
                        f"{len(unowned)} unowned once the lease expired); check {status}, naming {len(reported)}")
    how = "as U" if h.remedy == "u" else "kubectl uncordon"
    for node in sorted({p.node for p in out} | set(nodes)):
        done = h.uncordon_as_u(node) if h.remedy == "u" else h.kubectl_run("uncordon", node)
        if done.returncode != 0:
            result.notes.append(f"kill-no-resume: uncordon {node} ({how}): exit {done.returncode}: "
                                f"{(done.stdout + done.stderr).strip()[-200:]}")
    for p in out:
        name = p.key.split("/", 1)[1]
        svc = name.rsplit("-", 2)[0]  # a Deployment's pod: <deployment>-<hash>-<suffix>; the Service has its name
        try:
            wait(lambda: _back(h, gen, p.key, p.uid, svc), 15, f"{p.key} back in rotation")  # noqa: B023 - called at once, in this iteration
        except RuntimeError:
            result.left_out.add(p.uid)
            result.notes.append(f"kill-no-resume: uncordon ({how}) did not put {p.key} back in rotation")


def _back(h: Harness, gen: TrafficGenerator, key: str, uid: str, service: str) -> bool:
    """The pod (that very one) has its serving label again and is in its Service's ready endpoints; a pod gone
    or replaced has nothing to put back."""
    ns, name = key.split("/", 1)
    pods = [p for p in h.core.list_namespaced_pod(ns).items if p.metadata.name == name and p.metadata.uid == uid]
    if not pods or pods[0].metadata.deletion_timestamp:
        return True
    labelled = (pods[0].metadata.labels or {}).get(SERVING_LABEL[0]) == SERVING_LABEL[1]
    return labelled and key in gen.routable("Service", ns, service)
