"""One GPU's drain, on hand-built snapshots: which pods its plan takes (those bound to the GPU, never the node's
others), a GPU pod whose GPU nobody can tell (an error until the operator chooses, never left out silently), the
GPU named by index, UUID or DRA device, the bindings read from DCGM series and DRA claims, the fence's words, and
the options record keeping the GPU's scope for a resumed drain."""

from __future__ import annotations

import pytest

from gputui.backends.gpu_bindings import _merge, dcgm_gpus, dra_gpus
from gputui.ops.drain.gpu_fence import dry_run_words
from gputui.ops.drain.gpu_target import GpuNotFound, fence_words, find_gpu, gpu_options, rule_name
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.plan import Step, plan_drain
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.gpu_bindings import BoundGpu, GpuBindings
from gputui.vocabulary.gpu_resources import GpuResource, Scheme
from gputui.vocabulary.model import InferencePod, Node


def pod(name: str, gpus: int = 1, **kw) -> InferencePod:
    base = dict(namespace="ns", name=name, uid=f"uid-{name}", node="n1", owner_kind="ReplicaSet", gpu_request=gpus)
    base.update(kw)
    return InferencePod(**base)


def node(alloc: int = 4, cap: int = 4) -> Node:
    return Node("n1", True, False, "H100", cap, alloc,
                gpu_resources=(GpuResource("nvidia.com/gpu", Scheme.WHOLE, cap, alloc),))


def snap(*pods: InferencePod, n: Node | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, "t", nodes=(n or node(), Node("n2", True, False, "H100", 8, 8)), pods=pods)


BINDINGS = GpuBindings((BoundGpu(0, "GPU-aaa", pods=frozenset({"ns/a"})), BoundGpu(1, "GPU-bbb", pods=frozenset({"ns/b"})),
                        BoundGpu(2, "GPU-ccc")))


def test_the_plan_takes_only_the_pods_bound_to_the_gpu():
    s = snap(pod("a"), pod("b"), pod("cpu", gpus=0))
    plan = plan_drain(s, "n1", gpu_options(DrainOptions(), s, "n1", "1", BINDINGS))
    assert [p.pod.key for p in plan.pods] == ["ns/b"]
    assert not plan.blocked and plan.title == "node/n1 GPU 1"
    # The whole node's drain is unchanged: every pod.
    assert [p.pod.key for p in plan_drain(s, "n1").pods] == ["ns/a", "ns/b", "ns/cpu"]


def test_a_gpu_pod_nobody_attributes_blocks_the_plan_until_chosen():
    s = snap(pod("a"), pod("b"), pod("stray", gpus=2))
    options = gpu_options(DrainOptions(), s, "n1", "GPU-bbb", BINDINGS)
    assert options.unattributed == ("ns/stray",)
    plan = plan_drain(s, "n1", options)
    stray = next(p for p in plan.pods if p.pod.key == "ns/stray")
    assert stray.step is Step.ERROR and "unknown GPU" in stray.note and "--include-unattributed" in stray.note
    assert plan.blocked
    chosen = plan_drain(s, "n1", gpu_options(DrainOptions(), s, "n1", "1", BINDINGS, include_unattributed=True))
    assert not chosen.blocked
    assert {p.pod.key: p.step for p in chosen.pods} == {"ns/b": Step.EVICT, "ns/stray": Step.EVICT}
    assert "unknown GPU: moved too (chosen)" in next(p.note for p in chosen.pods if p.pod.key == "ns/stray")


def test_no_attribution_at_all_makes_every_gpu_pod_unknown():
    s = snap(pod("a"), pod("b"))
    none = GpuBindings((BoundGpu(0, "GPU-aaa"), BoundGpu(1, "GPU-bbb")), dcgm="its DCGM series name no pod")
    options = gpu_options(DrainOptions(), s, "n1", "1", none)
    assert options.gpu_pods == () and options.unattributed == ("ns/a", "ns/b")
    assert plan_drain(s, "n1", options).blocked


def test_the_gpu_is_named_by_index_uuid_or_device_and_a_wrong_one_lists_the_node_s():
    dra = GpuBindings((BoundGpu(None, "", "gpu.nvidia.com/n1/gpu-7"),))
    assert find_gpu(BINDINGS, "n1", "gpu-bbb").index == 1
    assert find_gpu(dra, "n1", "gpu-7").device == "gpu.nvidia.com/n1/gpu-7"
    with pytest.raises(GpuNotFound, match=r"no GPU '5'.*0 \(GPU-aaa\)"):
        find_gpu(BINDINGS, "n1", "5")


def test_fence_words_say_whether_a_new_pod_could_land_on_the_gpu():
    opts = DrainOptions(gpu="1")
    assert "a new pod could land on GPU 1" in fence_words(opts, node(4, 4))
    assert "removed 1 of 4 units from allocatable" in fence_words(opts, node(3, 4))
    assert "DeviceTaintRule" in fence_words(DrainOptions(gpu="1", gpu_device="d/p/gpu-1"), node())
    assert "unknown" in fence_words(opts, Node("n1", True, False, "H100", 4, 4))


def test_dcgm_series_and_dra_claims_bind_pods_to_gpus():
    series = [{"metric": {"gpu": "0", "UUID": "GPU-aaa", "namespace": "ns", "pod": "a"}},
              {"metric": {"gpu": "1", "UUID": "GPU-bbb"}},
              {"metric": {"gpu": "2", "UUID": "GPU-ccc", "pod_namespace": "ns", "pod_name": "old"}}]
    uuids, pods = dcgm_gpus(series)
    assert uuids == {0: "GPU-aaa", 1: "GPU-bbb", 2: "GPU-ccc"} and pods == {0: {"ns/a"}, 1: set(), 2: {"ns/old"}}
    slices = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1"}, "devices": [
        {"name": "gpu-1", "attributes": {"index": {"int": 1}, "uuid": {"string": "GPU-bbb"}}}]}}]
    claims = [{"metadata": {"namespace": "ns", "name": "c"}, "status": {
        "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"}]}},
        "reservedFor": [{"resource": "pods", "name": "b", "uid": "uid-b"}]}}]
    dra = dra_gpus(slices, claims, {"uid-b": "ns/b"})
    assert dra == [BoundGpu(1, "GPU-bbb", "gpu.nvidia.com/n1/gpu-1", frozenset({"ns/b"}))]
    merged = {g.index: g for g in _merge(uuids, pods, dra)}
    assert merged[1].device and merged[1].pods == {"ns/b"} and merged[0].pods == {"ns/a"}


def test_the_record_keeps_the_gpu_scope_for_a_resumed_drain():
    opts = DrainOptions(gpu="1", gpu_pods=("ns/b",), unattributed=("ns/x",), include_unattributed=True,
                        gpu_device="d/p/gpu-1")
    assert DrainOptions.from_json(opts.to_json()) == opts


def test_the_dry_run_s_status_is_read_or_said_missing():
    assert dry_run_words(None) == ""
    rule = {"status": {"conditions": [{"type": "EvictionInProgress", "status": "False", "message": "2 pods"}]}}
    assert dry_run_words(rule) == "2 pods"
    assert rule_name("Node_1", "gpu.nvidia.com/pool/gpu-1") == "gputui-fence-node-1-gpu-1"
