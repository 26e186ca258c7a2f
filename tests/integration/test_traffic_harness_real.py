"""The harness's data plane is real (issue 33, item 6): sessions routed by tests.support.traffic over the real
control plane's EndpointSlices, routes and pools land on pods, the real Prometheus reads their counts from the
engines' gauges, and the fake kubelet terminates pods as the kubelet does (not ready at once, preStop, grace).
No count in these tests is set by hand."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.crds import create_custom, get_custom, install_crd
from tests.support.fake_kubelet import SHUTDOWN_ANNOTATION
from tests.support.procs import wait_until
from tests.support.traffic import Durations, TrafficGenerator
from tests.support.workloads import SERVING_LABEL, ready_pods, served_deployment, service_for

POOL_GROUP = "inference.networking.k8s.io"
POOL_CRD = Path(__file__).resolve().parents[1] / "support/crds/inferencepools.inference.networking.k8s.io.yaml"


@dataclass
class Space:
    ns: str
    pool: str
    api: client.ApiClient
    core: client.CoreV1Api
    apps: client.AppsV1Api
    discovery: client.DiscoveryV1Api

    def key(self, pod: str) -> str:
        return f"{self.ns}/{pod}"

    def endpoints(self, service: str) -> dict[str, dict[str, bool | None]]:
        """The Service's endpoints as its real EndpointSlices have them: pod -> ready/serving/terminating."""
        out: dict[str, dict[str, bool | None]] = {}
        slices = self.discovery.list_namespaced_endpoint_slice(
            self.ns, label_selector=f"kubernetes.io/service-name={service}").items
        for sl in slices:
            for ep in sl.endpoints or []:
                if ep.target_ref is not None and ep.target_ref.kind == "Pod":
                    c = ep.conditions
                    out[ep.target_ref.name] = {"ready": c.ready, "serving": c.serving, "terminating": c.terminating}
        return out

    def unserve(self, pod: str) -> None:
        """Take one pod out of rotation: remove the label only its Service (or pool) selects on."""
        self.core.patch_namespaced_pod(pod, self.ns, {"metadata": {"labels": {SERVING_LABEL[0]: None}}})


@pytest.fixture
def space(request, cluster, fake_kubelet):
    """A namespace and an 8-GPU node of the test's own; pods are removed at once afterwards (grace 0) so a
    long grace period here never outlives the node."""
    suffix = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_"))[:20].strip("-")
    ns, pool = f"t-th-{suffix}", f"th-{suffix}"
    api = cluster.harness_client()
    sp = Space(ns, pool, api, client.CoreV1Api(api), client.AppsV1Api(api), client.DiscoveryV1Api(api))
    fake_kubelet.add_node(pool, gpus=8, labels={"gputui.test/pool": pool})
    sp.core.create_namespace({"metadata": {"name": ns}})
    try:
        yield sp
    finally:
        sp.apps.delete_collection_namespaced_deployment(ns)
        sp.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        sp.core.delete_namespace(ns)
        fake_kubelet.remove_node(pool)


def _generator(cluster, exporter, **kw) -> TrafficGenerator:
    return TrafficGenerator(cluster.kubeconfigs["harness"], exporter, **kw)


def _served(sp: Space, name: str, replicas: int, **kw) -> list[str]:
    """A Deployment behind a Service of the same name selecting app=NAME and the serving label; its pods,
    once Ready and in the Service's EndpointSlices."""
    sp.apps.create_namespaced_deployment(sp.ns, served_deployment(name, sp.ns, sp.pool, replicas, **kw))
    sp.core.create_namespaced_service(sp.ns, service_for(name, sp.ns, {"app": name}))
    pods = [p.metadata.name for p in ready_pods(sp.core, sp.ns, replicas, label_selector=f"app={name}")]
    wait_until(lambda: sorted(n for n, c in sp.endpoints(name).items() if c["ready"]) == pods, 30,
               what=f"{name}'s pods ready in its EndpointSlices")
    return pods


def _recent_values(gen: TrafficGenerator, pod: str, seconds: float) -> set[int]:
    """Every live count the generator had for the pod over the last `seconds`."""
    since = time.time() - seconds
    return {gen.live_at(pod, since)} | {v for t, v in gen.history(pod) if t >= since}


def test_sessions_land_on_both_ready_pods_and_prometheus_reads_their_counts(cluster, space, prometheus,
                                                                            inference_exporter):
    sp = space
    pods = _served(sp, "chat", 2, grace_s=5)
    gen = _generator(cluster, inference_exporter, seed=1, durations=Durations(mean_s=3, max_s=8))
    gen.add_route("Service", sp.ns, "chat", rate_per_s=2.0)
    with gen.start(run_for_s=12):
        expr = 'vllm:num_requests_running{namespace="%s"}' % sp.ns
        seen = prometheus.wait_until(expr, lambda v: set(v) == set(pods) and all(x > 0 for x in v.values()),
                                     by="pod", timeout=30)
        for pod, value in seen.items():  # what Prometheus scraped is a count the traffic really had
            assert int(value) in _recent_values(gen, sp.key(pod), 5), (pod, value, gen.history(sp.key(pod))[-5:])
        report = gen.wait(30)  # it stops by itself: arrivals over, every session ended
        assert report.rejected == 0 and report.cut == 0 and report.unfinished == 0
        assert report.started == report.ended >= 12
        assert all(report.pods[sp.key(p)].started >= 3 for p in pods), report.started_by_pod
        assert set(report.pods) == {sp.key(p) for p in pods}
        # Each session that ended is one request finished in the engine's counter, as vLLM counts them.
        prometheus.wait_until('sum(vllm:request_success_total{namespace="%s",finished_reason="stop"})' % sp.ns,
                              lambda v: list(v.values()) == [report.ended], timeout=15)
        prometheus.wait_until(expr, lambda v: set(v) == set(pods) and not any(v.values()), by="pod", timeout=15)
    assert not gen.errors


def test_a_pod_whose_serving_label_is_removed_leaves_the_endpointslice_and_drains_without_a_cut(
        cluster, space, prometheus, inference_exporter):
    sp = space
    out, stays = _served(sp, "chat", 2, grace_s=5)
    gen = _generator(cluster, inference_exporter, seed=2, durations=Durations(mean_s=3, max_s=8))
    gen.add_route("Service", sp.ns, "chat", rate_per_s=2.0)
    with gen.start(run_for_s=30):
        wait_until(lambda: gen.live(sp.key(out)) >= 2 and gen.live(sp.key(stays)) >= 1, 20,
                   what="sessions live on both pods")
        uid = sp.core.read_namespaced_pod(out, sp.ns).metadata.uid
        sp.unserve(out)
        wait_until(lambda: out not in sp.endpoints("chat") and sp.endpoints("chat").get(stays, {}).get("ready"), 15,
                   what=f"{out} gone from the EndpointSlice, {stays} still ready in it")
        wait_until(lambda: gen.routable("Service", sp.ns, "chat") == [sp.key(stays)], 5,
                   what="the generator's data plane to see it")
        cutoff = time.time()
        live_then = gen.live(sp.key(out))
        started_then = gen.report().pods[sp.key(stays)].started
        # Its count decays to 0 in Prometheus while the other pod's continues.
        prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % sp.ns,
                              lambda v: v.get(out) == 0 and v.get(stays, 0) > 0, by="pod", timeout=20)
        report = gen.stop()
    assert not [s for s in gen.sessions(sp.key(out)) if s.started >= cutoff], "a new session reached it"
    counts = [v for t, v in gen.history(sp.key(out)) if t >= cutoff]
    assert counts == sorted(counts, reverse=True) and counts[-1] == 0 and live_then > 0  # decayed, never rose
    assert report.pods[sp.key(stays)].started > started_then
    assert report.cut == 0 and report.rejected == 0
    pod = sp.core.read_namespaced_pod(out, sp.ns)  # out of rotation, still owned and running: no replacement
    assert pod.metadata.uid == uid and pod.status.phase == "Running" and pod.metadata.owner_references
    assert len(sp.core.list_namespaced_pod(sp.ns).items) == 2
    assert not gen.errors


def test_a_deleted_pod_is_terminating_at_once_goes_after_its_prestop_sleep_and_cuts_what_it_still_holds(
        cluster, space, fake_kubelet, inference_exporter):
    sp = space
    sleep_s = 5
    # The engine exits as soon as SIGTERM comes (after the preStop sleep), well inside its 30 s grace period.
    victim, other = _served(sp, "chat", 2, grace_s=30, prestop_sleep_s=sleep_s,
                            annotations={SHUTDOWN_ANNOTATION: "0"})
    # Long sessions, so that some still run when the pod goes however late a busy machine makes that (its
    # fake kubelet, the generator's watch): the cut is then certain, not a race against the clock.
    gen = _generator(cluster, inference_exporter, seed=3, durations=Durations(mean_s=15, max_s=40, min_s=1))
    gen.add_route("Service", sp.ns, "chat", rate_per_s=2.0)
    with gen.start(run_for_s=120):
        def outlives_the_pod():  # sessions that will still be running when the pod goes, late by up to 15 s
            later = time.time() + sleep_s + 15
            return [s for s in gen.sessions(sp.key(victim)) if s.outcome == "live" and s.planned_end > later]

        wait_until(lambda: len(outlives_the_pod()) >= 2, 60, what="sessions on the victim outliving it")
        uid = sp.core.read_namespaced_pod(victim, sp.ns).metadata.uid
        deleted = time.time()
        sp.core.delete_namespaced_pod(victim, sp.ns)  # its own grace period
        conds = wait_until(lambda: (c := sp.endpoints("chat").get(victim)) and c["terminating"] and c["serving"] is False
                           and c, 20, what="its endpoint terminating and not serving")
        marked = time.time()
        assert conds == {"ready": False, "serving": False, "terminating": True}  # not ready: the kubelet said so
        # Marked at once: while the pod is still there, in its preStop sleep (no longer than that is asked).
        terminating = sp.core.read_namespaced_pod(victim, sp.ns).metadata
        assert terminating.uid == uid and terminating.deletion_timestamp is not None
        grace_ends = terminating.deletion_timestamp.timestamp()  # the request, plus its 30 s grace period
        last_there = time.time()

        def gone():
            nonlocal last_there
            asked = time.time()
            try:
                there = sp.core.read_namespaced_pod(victim, sp.ns).metadata.uid == uid
            except ApiException as exc:
                if exc.status != 404:
                    raise
                there = False
            if there:
                last_there = asked  # it was there at some moment after this
            return not there

        wait_until(gone, 40, interval=0.1, what="the pod finalised")
        went = time.time()
        # It stayed for its preStop sleep (a lower bound: the kubelet starts the sleep no earlier than the
        # delete, whatever the machine's load), and went when its engine exited on the SIGTERM that followed,
        # not when its grace period ran out and the kubelet would have killed it.
        assert went - deleted >= sleep_s - 0.5, went - deleted
        assert went < grace_ends, (went, grace_ends)

        def replacement():  # the ReplicaSet's new pod takes sessions
            return [p for p, t in gen.report().pods.items() if p not in (sp.key(victim), sp.key(other)) and t.started]

        wait_until(replacement, 30, what="sessions on the replacement pod")
        report = gen.stop()
    gone_at = gen.gone_at(uid)
    assert gone_at is not None and gone_at > last_there  # its sessions were cut when it went, not before
    held = gen.sessions(sp.key(victim))  # including any started in the instant before its endpoint changed
    cut = [s for s in held if s.outcome == "cut"]
    assert cut and {s.id for s in cut} == {s.id for s in held if s.planned_end > gone_at}, (
        f"gone {went - deleted:.1f}s after the delete, {gone_at - deleted:.1f}s for the generator; sessions' "
        f"planned ends: {sorted(round(s.planned_end - deleted, 1) for s in held)}")
    assert all(s.outcome == "ended" for s in held if s.planned_end <= gone_at)
    assert not [s for s in gen.sessions(sp.key(victim)) if s.started > marked], "a session reached a terminating pod"
    assert report.cut == len(cut) == report.pods[sp.key(victim)].cut
    assert report.pods[sp.key(other)].cut == 0
    assert not [e for e in fake_kubelet.errors if sp.ns in e]
    assert not gen.errors


def _share(sessions, route: str, backend: str) -> float:
    mine = [s for s in sessions if s.route == route]
    return sum(s.backend == backend for s in mine) / max(1, len(mine))


def test_httproute_and_virtualservice_weights_split_sessions_80_20(cluster, space, prometheus, inference_exporter):
    sp = space
    install_crd(sp.api, "httproutes")
    install_crd(sp.api, "virtualservices")
    install_crd(sp.api, "destinationrules")
    v1 = _served(sp, "chat-v1", 2, grace_s=5, labels={"svc": "chat", "version": "v1"})
    v2 = _served(sp, "chat-v2", 1, grace_s=5, labels={"svc": "chat", "version": "v2"})
    create_custom(sp.api, "httproutes", sp.ns, {"metadata": {"name": "chat"}, "spec": {"rules": [
        {"matches": [{"headers": [{"name": "x-canary", "value": "1"}]}], "backendRefs": [{"name": "chat-v2", "port": 8000}]},
        {"backendRefs": [{"name": "chat-v1", "port": 8000, "weight": 80}, {"name": "chat-v2", "port": 8000, "weight": 20}]}]}})
    # Istio: one Service over both versions, subsets by the version label (its DestinationRule).
    sp.core.create_namespaced_service(sp.ns, service_for("chat", sp.ns, {"svc": "chat"}))
    create_custom(sp.api, "destinationrules", sp.ns, {"metadata": {"name": "chat"}, "spec": {
        "host": f"chat.{sp.ns}.svc.cluster.local",
        "subsets": [{"name": "v1", "labels": {"version": "v1"}}, {"name": "v2", "labels": {"version": "v2"}}]}})
    create_custom(sp.api, "virtualservices", sp.ns, {"metadata": {"name": "chat"}, "spec": {"hosts": ["chat"], "http": [
        {"route": [{"destination": {"host": "chat", "subset": "v1"}, "weight": 80},
                   {"destination": {"host": "chat", "subset": "v2"}, "weight": 20}]}]}})
    wait_until(lambda: len([c for c in sp.endpoints("chat").values() if c["ready"]]) == 3, 30, what="chat's endpoints")
    gen = _generator(cluster, inference_exporter, seed=4, durations=Durations(mean_s=3, max_s=10))
    gen.add_route("HTTPRoute", sp.ns, "chat", rate_per_s=3.0)
    gen.add_route("VirtualService", sp.ns, "chat", rate_per_s=3.0)
    http, vs = f"HTTPRoute {sp.ns}/chat", f"VirtualService {sp.ns}/chat"
    with gen.start(run_for_s=60):
        # A sample of 50 sessions per route (some 17 s at 3 a second): enough for the 80/20 split to show.
        wait_until(lambda: min(sum(s.route == r for s in gen.sessions()) for r in (http, vs)) >= 50, 40, interval=0.5,
                   what="50 sessions on each route")
        window_end = time.time()
        # Over the window the engines' gauges follow the weights too (averaged, per version).
        avg = 'sum by (v) (label_replace(avg_over_time(vllm:num_requests_running{namespace="%s"}[15s]), ' \
              '"v", "$1", "pod", "chat-(v[12])-.*"))' % sp.ns
        by_version = prometheus.query_values(avg, by="v")
        sessions = gen.sessions()
        # Shift everything to v2 on the HTTPRoute: new sessions of that route follow at once.
        route = get_custom(sp.api, "httproutes", sp.ns, "chat")
        route["spec"]["rules"][1]["backendRefs"][0]["weight"] = 0
        client.CustomObjectsApi(sp.api).replace_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", sp.ns, "httproutes", "chat", route)
        shifted = time.time()
        wait_until(lambda: len([s for s in gen.sessions() if s.route == http and s.started > shifted + 1.5]) >= 6, 20,
                   what="sessions after the shift")
        report = gen.stop()
    assert report.rejected == 0 and report.cut == 0
    early = [s for s in sessions if s.started < window_end]
    assert len([s for s in early if s.route == http]) >= 50 and len([s for s in early if s.route == vs]) >= 50
    assert 0.08 <= _share(early, http, f"Service {sp.ns}/chat-v2") <= 0.35, report.by_backend
    assert 0.08 <= _share(early, vs, f"Service {sp.ns}/chat v2") <= 0.35, report.by_backend
    assert {s.pod for s in early if s.backend == f"Service {sp.ns}/chat v2"} == {sp.key(v2[0])}  # the subset's pod
    assert {s.pod for s in early if s.backend == f"Service {sp.ns}/chat-v1"} == {sp.key(p) for p in v1}
    assert set(by_version) == {"v1", "v2"} and 0.05 <= by_version["v2"] / sum(by_version.values()) <= 0.4, by_version
    after = [s for s in gen.sessions() if s.route == http and s.started > shifted + 1.5]
    assert after and all(s.backend == f"Service {sp.ns}/chat-v2" for s in after)
    assert not gen.errors


def _install_pool_crd(api) -> None:
    try:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(yaml.safe_load(POOL_CRD.read_text()))
    except ApiException as exc:
        if exc.status != 409:
            raise
    custom = client.CustomObjectsApi(api)
    wait_until(lambda: custom.list_cluster_custom_object(POOL_GROUP, "v1", "inferencepools") is not None, 30,
               what="InferencePool served")


def test_an_httproute_over_inferencepools_routes_to_their_ready_selected_pods(cluster, space, prometheus,
                                                                           inference_exporter):
    """The pools' pods are chosen by their selector and Ready condition (the endpoint picker's view, no
    Service): 80/20 between two pools, and a pod whose serving label is removed gets nothing new."""
    sp = space
    install_crd(sp.api, "httproutes")
    _install_pool_crd(sp.api)
    pods: dict[str, list[str]] = {}
    for version, replicas in (("v1", 2), ("v2", 1)):
        name = f"summ-{version}"
        sp.apps.create_namespaced_deployment(sp.ns, served_deployment(name, sp.ns, sp.pool, replicas, grace_s=5))
        client.CustomObjectsApi(sp.api).create_namespaced_custom_object(POOL_GROUP, "v1", sp.ns, "inferencepools", {
            "apiVersion": f"{POOL_GROUP}/v1", "kind": "InferencePool", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name, SERVING_LABEL[0]: SERVING_LABEL[1]}},
                     "targetPorts": [{"number": 8000}], "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": 9002}}}})
        pods[version] = [p.metadata.name for p in ready_pods(sp.core, sp.ns, replicas, label_selector=f"app={name}")]
    create_custom(sp.api, "httproutes", sp.ns, {"metadata": {"name": "summ"}, "spec": {"rules": [{"backendRefs": [
        {"group": POOL_GROUP, "kind": "InferencePool", "name": "summ-v1", "weight": 80},
        {"group": POOL_GROUP, "kind": "InferencePool", "name": "summ-v2", "weight": 20}]}]}})
    gen = _generator(cluster, inference_exporter, seed=5, durations=Durations(mean_s=3, max_s=10))
    gen.add_route("HTTPRoute", sp.ns, "summ", rate_per_s=3.0)
    route = f"HTTPRoute {sp.ns}/summ"
    with gen.start(run_for_s=60):
        assert sorted(gen.routable("InferencePool", sp.ns, "summ-v1")) == [sp.key(p) for p in pods["v1"]]
        # A sample of 42 sessions (some 14 s at 3 a second): enough for the 80/20 split to show.
        wait_until(lambda: len(gen.sessions()) >= 42, 40, interval=0.5, what="42 sessions on the route")
        first = gen.sessions()
        out = pods["v1"][0]
        sp.unserve(out)
        wait_until(lambda: gen.routable("InferencePool", sp.ns, "summ-v1") == [sp.key(pods["v1"][1])], 10,
                   what="the pool to drop the pod")
        cutoff = time.time()
        prometheus.wait_until('vllm:num_requests_running{namespace="%s"}' % sp.ns,
                              lambda v: set(v) == {*pods["v1"], *pods["v2"]}, by="pod", timeout=20)
        wait_until(lambda: len([s for s in gen.sessions(sp.key(pods["v1"][1])) if s.started >= cutoff]) >= 4, 20,
                   what="new sessions on the pool's other pod")
        report = gen.stop()
    assert len(first) >= 42
    assert 0.06 <= _share(first, route, f"InferencePool {sp.ns}/summ-v2") <= 0.4, report.by_backend
    assert {s.pod for s in first} == {sp.key(p) for p in pods["v1"] + pods["v2"]}
    assert not [s for s in gen.sessions(sp.key(out)) if s.started >= cutoff]
    assert report.cut == 0 and report.rejected == 0
    assert not gen.errors
