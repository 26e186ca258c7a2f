"""`gputui check`: each rule passing and failing on snapshots made for it, unknown when it cannot read,
the demo's planted violations, the outputs (JUnit parsed back) and the exit codes."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

from gputui.checks.output import as_json, as_junit, as_text
from gputui.checks.result import Status, exit_code
from gputui.checks.rules import CheckContext, run_checks
from gputui.snapshot import ClusterSnapshot, SourceStatus
from gputui.vocabulary.check_facts import AlertRule, CheckFacts
from gputui.vocabulary.exporter_counters import NEEDED
from gputui.vocabulary.model import Budget, Gpu, InferencePod, Node, PodProbes, PodSelector
from tests.support.gputui_cli import run

METRICS_OK = (SourceStatus("API", 100.0), SourceStatus("metrics", 100.0))


def node(name: str, **kw) -> Node:
    base = dict(name=name, ready=True, unschedulable=False, gpu_product="NVIDIA-H100-80GB-HBM3", gpu_capacity=8,
                gpu_allocatable=8, driver_version="550.127.05", cuda_version="12.4",
                gpus=(Gpu(0, "u0", util_pct=10.0, temp_c=40.0),))
    base.update(kw)
    return Node(**base)


def pod(name: str, **kw) -> InferencePod:
    base = dict(namespace="llm", name=name, uid=name, node="a", gpu_request=1, service="chat", version="v1",
                labels={"app": "chat", "serving": "true"}, session_signal=True,
                termination_grace_s=60, probes=PodProbes(True, False, 600, True))
    base.update(kw)
    return InferencePod(**base)


GPU_RULES = (
    AlertRule("GPUXidError", "gpu", "DCGM_FI_DEV_XID_ERRORS > 0", "inactive"),
    AlertRule("GPUHot", "gpu", "DCGM_FI_DEV_GPU_TEMP > 85", "inactive"),
    AlertRule("GPUMemoryFull", "gpu", "DCGM_FI_DEV_FB_FREE < 1024", "inactive"),
)
FACTS_OK = CheckFacts(memory_growth_mib={"llm/chat-1": 12.0, "llm/chat-2": 0.0}, alert_rules=GPU_RULES,
                      beyond_needs={"read secrets": False, "do anything (cluster-admin)": False},
                      fault_fields=dict.fromkeys(NEEDED, 2))  # every GPU fault field collected


def results(snap: ClusterSnapshot, **kw) -> dict[str, object]:
    """The checks as a writer that may cordon, evict and shift, with healthy facts, unless told otherwise."""
    kw.setdefault("facts", FACTS_OK)
    kw.setdefault("read_only", False)
    kw.setdefault("permissions", {"cordon": True, "evict": True, "shift": True})
    return {r.id: r for r in run_checks(CheckContext(snap, **kw))}


def healthy() -> ClusterSnapshot:
    return ClusterSnapshot(0.0, "test", nodes=(node("a"), node("b")), pods=(pod("chat-1"), pod("chat-2", node="b")),
                           budgets=(Budget("llm", "chat-pdb", {"app": "chat"}, max_unavailable="1",
                                           disruptions_allowed=1, current_healthy=2, desired_healthy=1,
                                           expected_pods=2),),
                           sources=METRICS_OK, session_counts={("llm", "chat-1"): 1, ("llm", "chat-2"): 1},
                           selectors=SELECTORS)


# The Service selects on a label its Deployment does not: removing it takes one pod out of rotation.
SELECTORS = (PodSelector("Service", "llm", "chat", {"app": "chat", "serving": "true"}),
             PodSelector("Deployment", "llm", "chat", {"app": "chat"}, frozenset({"app"})))


def test_a_healthy_cluster_passes_every_check():
    found = results(healthy())
    assert {r.status for r in found.values()} == {Status.PASS}, {k: r.summary for k, r in found.items()}


def test_each_planted_problem_fails_its_own_check_and_nothing_else():
    snap = healthy()
    cases = {
        "nodes.recognised": dict(nodes=(node("a"), node("b", gpu_product=""))),
        "gpu.health": dict(nodes=(node("a"), node("b", gpus=(Gpu(0, "u0", xid=79),)))),
        "versions.consistent": dict(nodes=(node("a"), node("b", driver_version="535.183.01"))),
        "metrics.dcgm": dict(nodes=(node("a"), node("b", gpus=()))),
        "pods.pending": dict(pods=(*snap.pods, pod("chat-3", node="", phase="Pending", pending_reason="Insufficient"))),
        "services.pdb": dict(budgets=()),
        "services.grace": dict(pods=(pod("chat-1", termination_grace_s=10), pod("chat-2", node="b"))),
        "services.probes": dict(pods=(pod("chat-1", probes=PodProbes(False, False, 600, True)), pod("chat-2", node="b"))),
        "services.startup": dict(pods=(pod("chat-1", probes=PodProbes(True, False, 60, True)), pod("chat-2", node="b"))),
    }
    for check, change in cases.items():
        found = results(ClusterSnapshot(**{**snap_fields(snap), **change}))
        failing = {k for k, r in found.items() if r.status is Status.FAIL}
        assert failing == {check}, (check, {k: found[k].summary for k in failing})
        one = found[check]
        if len(one.objects) == 1:  # one bad object: its noun is singular ("1 node …", never "1 nodes …")
            assert re.match(r"1 ([A-Za-z]+ )*?(node|pod|service) ", one.summary), one.summary
    warned = results(ClusterSnapshot(**{**snap_fields(snap), "pods": (pod("chat-1"),)}))
    assert warned["services.replicas"].status is Status.WARN  # one replica: one failure takes it down
    for probes, check in ((PodProbes(True, True, 600, True), "services.probes"),
                          (PodProbes(True, False, 600, False), "services.memory")):
        found = results(ClusterSnapshot(**{**snap_fields(snap), "pods": (pod("chat-1", probes=probes),
                                                                         pod("chat-2", node="b"))}))
        assert found[check].status is Status.WARN and all(r.status is Status.PASS for k, r in found.items() if k != check)


def test_probe_windows_follow_the_api_defaults():
    from gputui.backends.kube_objects import pod_record

    def probes(container: dict) -> PodProbes:
        return pod_record({"metadata": {"name": "p"}, "spec": {"containers": [container]}}).probes

    assert probes({"name": "c"}) == PodProbes(False, False, None, False)  # nothing kills it; nothing gates it
    live = {"httpGet": {"path": "/health", "port": 8000}}
    assert probes({"livenessProbe": live}).startup_allowance_s == 30  # 0 + 3 × 10 s
    assert probes({"livenessProbe": live, "startupProbe": {"failureThreshold": 60, "periodSeconds": 10}}
                  ).startup_allowance_s == 600
    both = probes({"livenessProbe": live, "readinessProbe": live, "resources": {"limits": {"memory": "64Gi"}}})
    assert both.readiness and both.readiness_is_liveness and both.memory_limited


def snap_fields(snap: ClusterSnapshot) -> dict:
    return dict(taken_at=snap.taken_at, context=snap.context, nodes=snap.nodes, pods=snap.pods,
                services=snap.services, budgets=snap.budgets, sources=snap.sources, session_counts=snap.session_counts,
                selectors=snap.selectors)


def test_what_cannot_be_read_is_unknown_never_a_pass():
    down = ClusterSnapshot(**{**snap_fields(healthy()),
                              "sources": (SourceStatus("API", 100.0), SourceStatus("metrics", None, "unavailable"))})
    found = results(down, permissions={}, facts=CheckFacts(memory_error="unavailable", rules_error="unavailable"))
    for check in ("metrics.dcgm", "metrics.sessions", "gpu.memory", "alerts.rules", "alerts.firing"):
        assert found[check].status is Status.UNKNOWN, check
    assert found["identity.permissions"].status is Status.UNKNOWN  # a writer whose rights were not probed
    assert exit_code(list(found.values())) == 0 and exit_code(list(found.values()), strict=True) == 1


def test_outputs_say_the_same_and_junit_parses():
    from gputui.backends.demo import DemoCluster
    from tests.demo_clock import ManualClock

    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    found = run_checks(CheckContext(snap))
    failing = {r.id for r in found if r.status is Status.FAIL}
    assert {"gpu.health", "versions.consistent", "pods.pending"} <= failing  # the demo's planted problems
    text = as_text(found, snap.context, snap.simulated)
    assert text.startswith("# SIMULATED") and all(r.id in text for r in found)
    data = json.loads(as_json(found, snap.context, snap.simulated))
    assert data["simulated"] is True and data["counts"]["fail"] == len(failing)
    suite = ET.fromstring(as_junit(found, snap.context, snap.simulated))
    cases = suite.findall("testcase")
    assert len(cases) == len(found) == int(suite.get("tests"))
    assert {c.get("name") for c in cases if c.find("failure") is not None} == failing
    assert int(suite.get("failures")) == len(failing)


def test_the_command_exits_1_on_a_failure_and_2_on_bad_input(tmp_path):
    done = run("check", "--demo", "-o", "junit", home=tmp_path)
    assert done.returncode == 1, done.stderr
    assert ET.fromstring(done.stdout).get("name") == "gputui check"
    only = run("check", "--demo", "--only", "metrics", home=tmp_path)
    assert only.returncode == 0 and "metrics.dcgm" in only.stdout and "gpu.health" not in only.stdout
    bad = run("check", "--demo", "--only", "nowhere", home=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_memory_growth_and_alert_rules_judge_what_the_metrics_store_said():
    def check(id: str, **facts):
        return results(healthy(), read_only=True, facts=CheckFacts(**{"memory_growth_mib": {},
                                                                       "alert_rules": GPU_RULES, **facts}))[id]

    leak = check("gpu.memory", memory_growth_mib={"llm/chat-1": 3072.0, "llm/chat-2": 100.0})
    assert leak.status is Status.WARN and leak.objects == ("llm/chat-1 (+3.0 GiB)",)
    assert check("gpu.memory", memory_growth_mib=None, memory_error="DCGM series carry no pod label").status \
        is Status.UNKNOWN
    assert check("alerts.rules", alert_rules=()).status is Status.FAIL  # rules, but none on a GPU signal
    gaps = check("alerts.rules", alert_rules=(
        *GPU_RULES[:2],
        AlertRule("GPUMemoryFull", "gpu", "DCGM_FI_DEV_FB_FREE < 1024", "inactive", "err", "vector contains metrics")))
    assert gaps.status is Status.WARN and gaps.objects == ("GPUMemoryFull (cannot evaluate: vector contains metrics)",)
    uncovered = check("alerts.rules", alert_rules=GPU_RULES[:1])
    assert set(uncovered.objects) == {"nothing alerts on temperature", "nothing alerts on GPU memory"}
    firing = check("alerts.firing", alert_rules=(AlertRule("GPUXidError", "gpu", "DCGM_FI_DEV_XID_ERRORS > 0",
                                                           "firing", firing=2), *GPU_RULES[1:]))
    assert firing.status is Status.WARN and firing.objects == ("GPUXidError (2 firing)",)
    # Nothing to fire is not "none firing"; a store without the rules API is not "no rules".
    assert check("alerts.firing", alert_rules=()).status is Status.UNKNOWN
    for id in ("alerts.rules", "alerts.firing"):
        assert check(id, alert_rules=None, rules_error="404 Not Found").status is Status.UNKNOWN


def test_least_privilege_warns_on_grants_gputui_never_uses_and_is_unknown_when_not_asked():
    def check(**kw):
        return results(healthy(), **kw)["identity.least_privilege"]

    admin = check(facts=CheckFacts(beyond_needs={"read secrets": True, "do anything (cluster-admin)": True,
                                                 "delete nodes": False}))
    assert admin.status is Status.WARN and admin.objects == ("read secrets", "do anything (cluster-admin)")
    assert check().status is Status.PASS
    assert check(read_only=True).status is Status.UNKNOWN  # read-only sends no access review
    assert check(facts=CheckFacts(beyond_needs={"read secrets": None})).status is Status.UNKNOWN


def test_a_spec_check_is_unknown_when_some_pods_specs_were_not_read():
    snap = healthy()
    partial = ClusterSnapshot(**{**snap_fields(snap), "pods": (pod("chat-1"), pod("chat-2", node="b", probes=None))})
    found = results(partial)
    for check in ("services.probes", "services.startup", "services.memory"):
        assert found[check].status is Status.UNKNOWN and "llm/chat-2" in found[check].objects, check


def test_every_check_phrase_has_a_head_noun_with_a_singular():
    """verdict() words one bad object in the singular from SINGULAR: each check's phrase must name one of those."""
    from gputui.checks.context import SINGULAR

    phrases = []
    for path in Path("gputui/checks").glob("*.py"):
        for call in ast.walk(ast.parse(path.read_text())):
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "verdict":
                found = call.args[5] if len(call.args) > 5 else next(k.value for k in call.keywords if k.arg == "found")
                phrases.append(ast.unparse(found))
    assert len(phrases) >= 15
    for phrase in phrases:
        assert any(re.search(rf"\b{word}\b", phrase) for word in SINGULAR), phrase


def test_pods_no_label_can_take_out_of_rotation_are_named_with_the_commands_that_fix_it():
    only_app = (PodSelector("Service", "llm", "chat", {"app": "chat"}), SELECTORS[1])
    found = results(ClusterSnapshot(**{**snap_fields(healthy()), "selectors": only_app}))["services.rotation"]
    assert found.status is Status.WARN
    assert "Service llm/chat selects it only on app, which Deployment llm/chat selects on too" in found.summary
    # The template first, then the selector: the other order leaves the Service no pod in between.
    assert found.fix.index("patch deployment/chat") < found.fix.index("patch service chat")
    unread = results(ClusterSnapshot(**{**snap_fields(healthy()), "selectors": None}))["services.rotation"]
    assert unread.status is Status.UNKNOWN  # never a pass from what was not read
