"""The scheduling facts read from a pod's and a node's JSON (gputui.backends.kube_scheduling), against the
scheduler's documented readings: requests summed as component-helpers' PodRequests does, node affinity terms
as nodeaffinity reads them, tolerations as core/v1 ToleratesTaint, selectors as the scheduler parses them."""

from gputui.backends import kube_objects as ko
from gputui.backends.kube_scheduling import node_scheduling, pod_scheduling, requests_of
from gputui.vocabulary.label_selectors import Requirement
from gputui.vocabulary.scheduling import EMPTY_POD, Taint, Toleration


def container(cpu: str | None = None, memory: str | None = None, gpus: str | None = None, **extra) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("nvidia.com/gpu", gpus)) if v}
    return {"name": "c", "resources": {"requests": requests}, **extra}


def test_requests_sum_containers_and_take_the_largest_init_container_with_sidecars():
    spec = {
        "containers": [container("1", "1Gi"), container("500m", "1Gi", gpus="8")],
        # a sidecar (restartable init container) runs beside the containers: added to their sum, and to every
        # init container after it
        "initContainers": [container("2"), container("250m", restartPolicy="Always"), container("3")],
        "overhead": {"cpu": "100m"},
    }
    # containers 1.5 + sidecar 0.25 = 1.75; the init container after the sidecar 3 + 0.25 = 3.25: the larger,
    # then the overhead. GPUs are not among these requests (they are the pod's gpu_units).
    assert dict(requests_of(spec)) == {"cpu": 3350, "memory": 2 * 2**30}


def test_only_limits_set_count_as_requests_and_pod_level_requests_replace_the_sum():
    spec = {"containers": [{"resources": {"limits": {"cpu": "2", "memory": "1G"}}}],
            "resources": {"requests": {"cpu": "4"}}}
    assert dict(requests_of(spec)) == {"cpu": 4000, "memory": 10**9}
    # Rounded up as Quantity.MilliValue and Value round.
    assert dict(requests_of({"containers": [container("0.0001", "1.5")]})) == {"cpu": 1, "memory": 2}


def test_node_affinity_terms_as_nodeaffinity_reads_them():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {},  # an empty term is dropped: it matches nothing
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1", "z2"]},
                              {"key": "gen", "operator": "Gt", "values": ["3"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}]}}}
    facts = pod_scheduling({"affinity": affinity, "nodeSelector": {"pool": "llm"}}, "ns", {})
    assert facts.matches_node("n1", {"pool": "llm", "zone": "z2", "gen": "4"})
    assert not facts.matches_node("n1", {"pool": "llm", "zone": "z2", "gen": "3"})  # Gt is strict
    assert not facts.matches_node("n1", {"pool": "llm", "zone": "z2", "gen": "x"})  # not a number
    assert facts.matches_node("n9", {"pool": "llm"})  # the field term
    assert not facts.matches_node("n9", {})  # the node selector holds too
    assert facts.describe_nodes() == "pool=llm and (zone in (z1,z2),gen>3 or name=n9)"
    only_empty = pod_scheduling({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}]}}}}, "ns", {})
    assert only_empty.node_terms == () and not only_empty.matches_node("n1", {"zone": "z1"})


def test_tolerations_as_the_api_matches_them():
    exists_all = Toleration("", "Exists")
    gpu_any = Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule")
    dedicated = Toleration("dedicated", "Equal", "llm")
    taint = Taint("dedicated", "llm", "NoSchedule")
    assert exists_all.tolerates(taint) and dedicated.tolerates(taint)
    assert not dedicated.tolerates(Taint("dedicated", "batch", "NoSchedule"))
    assert not gpu_any.tolerates(Taint("nvidia.com/gpu", "present", "NoExecute"))  # another effect
    assert str(dedicated) == "dedicated=llm" and str(gpu_any) == "nvidia.com/gpu:NoSchedule"


def test_pod_terms_namespaces_and_selectors():
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term, {**term, "namespaceSelector": {}}, {"topologyKey": "zone"}]}}}
    own, every, none = pod_scheduling(spec, "ns", {}).anti_affinity
    assert own.selects("ns", {"app": "x"}) and not own.selects("other", {"app": "x"})
    assert every.selects("other", {"app": "x"})
    assert not none.selects("ns", {"app": "x"})  # no labelSelector: no pod
    labelled = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**term, "namespaceSelector": {"matchLabels": {"team": "a"}}}]}}}
    assert "namespaces are not read" in pod_scheduling(labelled, "ns", {}).unread


def test_spread_merges_match_label_keys_and_keeps_hard_constraints_only():
    spec = {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["pod-template-hash", "absent"]},
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "x"}}}]}
    (spread,) = pod_scheduling(spec, "ns", {"app": "x", "pod-template-hash": "abc"}).spread
    assert spread.selector == (Requirement("pod-template-hash", "In", ("abc",)), Requirement("app", "In", ("x",)))
    assert spread.honor_affinity and not spread.honor_taints and spread.min_domains == 1


def test_rules_the_preview_does_not_model_are_named():
    assert "PersistentVolumeClaim" in pod_scheduling(
        {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]}, "ns", {}).unread
    assert "hostPort" in pod_scheduling({"containers": [{"ports": [{"containerPort": 80, "hostPort": 80}]}]},
                                        "ns", {}).unread
    assert "scheduled by" in pod_scheduling({"schedulerName": "volcano"}, "ns", {}).unread
    assert pod_scheduling({"containers": [{"ports": [{"containerPort": 80}]}]}, "ns", {}) is EMPTY_POD


def test_pods_of_one_spec_share_their_facts_and_nodes_alike_theirs():
    spec = {"nodeSelector": {"zone": "z1"}, "containers": [container("1")]}
    a = ko.pod_record({"metadata": {"name": "a", "namespace": "ns"}, "spec": dict(spec, nodeName="n1")})
    b = ko.pod_record({"metadata": {"name": "b", "namespace": "ns"}, "spec": dict(spec, nodeName="n2")})
    assert a.scheduling is b.scheduling and a.scheduling is not None
    assert a.scheduling.request("cpu") == 1000 and a.scheduling.node_selector == (("zone", "z1"),)
    taint = {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}
    n1 = node_scheduling({"taints": [dict(taint, timeAdded="t1")]}, {"cpu": "8", "pods": "110", "nvidia.com/gpu": "8"})
    n2 = node_scheduling({"taints": [dict(taint, timeAdded="t2")]}, {"cpu": "8", "pods": "110", "nvidia.com/gpu": "8"})
    assert n1 is n2 and n1.taints == (Taint("dedicated", "llm", "NoSchedule"),)
    assert dict(n1.allocatable) == {"cpu": 8000, "pods": 110}  # GPUs are the node's gpu_resources
    node = ko.node_record({"metadata": {"name": "n"}, "spec": {"taints": [taint]}, "status": {"allocatable": {}}})
    assert node.scheduling is not None and node.scheduling.offers("pods") == 0
