"""gputui's own audit log under a drain that a PodDisruptionBudget holds, on the real apiserver (issue 34): one
entry per state change, as README says ("a PDB's 5 s retries of one eviction are one intent and one result, whose
`tries` says how many"), checked against the apiserver's own count of the retries in its audit log."""

from __future__ import annotations

import subprocess
import sys

from tests.support.audit_lines import raw_lines, written
from tests.support.drain_safety import POOL_LABEL, batch_pods, budget, place, scene
from tests.support.gputui_cli import environment
from tests.support.procs import wait_until

MINUTE_OF_TRIES = 13  # kubectl's 5 s retry period: the 13th try is a minute after the first


def test_a_drain_held_by_a_pdb_for_a_minute_writes_one_audit_entry_for_that_state(cluster, fake_kubelet, tmp_path):
    """A budget refuses the eviction for a minute (13 tries, each a 429 in the apiserver's log): gputui's log holds
    one intent for it all along, no result; once the budget allows, one result, `evicted`, whose `tries` is the
    apiserver's count of eviction requests. Every other state change is in the log once.

    Fails on this one-line mutation of gputui/ops/drain/run.py's _poll: `if outcome is not
    EvictionOutcome.BLOCKED:` → `if True:` (a result after every 429, then a new intent: an entry per retry)."""
    ns, node = "t-audit-pdb", "audit-pdb"
    with scene(cluster, fake_kubelet, ns, {n: {"gpus": 4, "labels": {POOL_LABEL: node}} for n in (node, f"{node}-spare")}) as (core, apps, policy):
        (pod,) = place(core, apps, ns, batch_pods("job", ns, node, 1), node, 1, spare=f"{node}-spare")
        policy.create_namespaced_pod_disruption_budget(ns, budget("job-pdb", "job", 1))
        target = f"pod/{ns}/{pod.metadata.name}"
        log = tmp_path / ".state" / "gputui" / "audit.jsonl"

        def tries(code: int | None = None) -> list[dict]:
            return [e for e in cluster.audit_events("admin", since=mark, verbs={"create"}, resource="pods")
                    if e["objectRef"].get("subresource") == "eviction" and e["objectRef"].get("name") == pod.metadata.name
                    and (code is None or e["responseStatus"]["code"] == code)]

        mark = cluster.audit_mark()
        proc = subprocess.Popen([sys.executable, "-u", "-m", "gputui", "drain", node,
                                 "--kubeconfig", str(cluster.admin_kubeconfig)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment(tmp_path))
        try:
            wait_until(lambda: len(tries(429)) >= MINUTE_OF_TRIES, 100, interval=1, what="a minute of 429s")
            held = [e for e in raw_lines(log) if e["target"] == target]
            assert [(e["phase"], e["action"]) for e in held] == [("intent", "evict")], held  # one, still open
            policy.patch_namespaced_pod_disruption_budget("job-pdb", ns, {"spec": {"minAvailable": 0}})
            out, _ = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == 0, out
        sent, refused = tries(), tries(429)
        assert len(sent) == len(refused) + 1 and len(refused) >= MINUTE_OF_TRIES
        entries = [e for e in raw_lines(log) if e["target"] == target]
        assert [(e["phase"], e["action"]) for e in entries] == [("intent", "evict"), ("result", "evict")], entries
        assert entries[1]["result"] == "evicted" and entries[1]["params"]["tries"] == len(sent), entries[1]
        # The drain's whole record, each state change once (the lease's renewals change no state: not logged).
        said = [(e["action"], e["params"].get("phase", "")) for e in written(log)]
        assert said == [("lease", ""), ("cordon", ""), ("annotate", "cordoned"), ("annotate", "waiting"),
                        ("evict", ""), ("annotate", "done"), ("lease-release", "")], said
