"""The demo's GPU fault stories (issue 37 item 6): an application XID, a hardware XID on a GPU a pod of a multi-GPU
service holds (the demo's pod attribution names that pod), rising uncorrectable row remaps and thermal throttling,
each in the node's alerts and faults; the other nodes' figures are unchanged by them."""

from gputui.backends.demo import demo_backend
from gputui.backends.demo.scenario import (
    APP_XID_GPU,
    APP_XID_NODE,
    HW_XID_GPU,
    HW_XID_NODE,
    REMAP_EVERY_S,
    REMAP_GPU,
    REMAP_NODE,
    THERMAL_NODE,
)
from gputui.policy.health import node_alerts
from gputui.vocabulary.gpu_faults import faults_of
from tests.demo_clock import ManualClock


def _demo():
    clock = ManualClock()
    return demo_backend(clock=clock).reader, clock


def test_the_application_xid_is_told_to_the_owner_and_the_gpu_stays_in_service():
    cluster, _ = _demo()
    node = cluster.snapshot().node(APP_XID_NODE)
    gpu = node.gpus[APP_XID_GPU]
    assert gpu.xid == 13 and gpu.util_pct is not None  # the GPU answers on
    assert node.gpu_allocatable == node.gpu_capacity
    xid = faults_of(gpu)[0]
    assert xid.category == "application" and "do not drain" in xid.action
    assert any(a.kind == "XID" and "XID 13" in a.message for a in node_alerts(node))
    held = cluster.gpu_pods(APP_XID_NODE)[APP_XID_GPU]
    assert [k.split("/")[1].rsplit("-", 1)[0] for k in held] == ["finetune-llama-lora"]


def test_the_hardware_xid_strikes_a_gpu_one_pod_of_a_multi_gpu_service_holds():
    cluster, _ = _demo()
    snap = cluster.snapshot()
    node = snap.node(HW_XID_NODE)
    assert node.gpus[HW_XID_GPU].xid == 79 and faults_of(node.gpus[HW_XID_GPU])[0].category == "hardware"
    assert node.gpu_allocatable == node.gpu_capacity - 1  # the device plugin stopped offering it
    on_gpu = cluster.gpu_pods(HW_XID_NODE)
    assert len(on_gpu[HW_XID_GPU]) == 1
    pod = next(p for p in snap.pods if p.key == on_gpu[HW_XID_GPU][0])
    assert pod.service == "qwen2-72b" and pod.gpu_request > 1  # one pod of several GPUs, of a service
    assert len({p.node for p in snap.pods if p.service == pod.service}) > 1  # whose replicas span nodes
    assert [g for g, keys in on_gpu.items() if pod.key in keys] == [4, 5, 6, 7]
    assert sum(pod.key in keys for keys in on_gpu.values()) == 4
    # the other pod of the node holds none of the faulted GPU
    assert all(pod.key not in on_gpu[g] for g in range(4))


def test_uncorrectable_row_remaps_rise_over_simulated_time_with_a_remap_pending():
    cluster, clock = _demo()

    def rows():
        gpu = cluster.snapshot().node(REMAP_NODE).gpus[REMAP_GPU]
        return gpu.extra["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"], gpu

    first, gpu = rows()
    assert gpu.extra["DCGM_FI_DEV_ROW_REMAP_PENDING"] == 1.0
    assert faults_of(gpu)[0].category == "reset-gpu"
    assert any("row remap pending" in a.message for a in node_alerts(cluster.snapshot().node(REMAP_NODE)))
    clock.advance(2 * REMAP_EVERY_S)
    later, _ = rows()
    assert later == first + 2
    others = cluster.snapshot().node(REMAP_NODE).gpus
    assert all(g.extra["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"] == 0 for g in others if g.index != REMAP_GPU)


def test_the_thermal_node_reports_its_thermal_bits_and_runs_hot():
    cluster, _ = _demo()
    node = cluster.snapshot().node(THERMAL_NODE)
    for gpu in node.gpus:
        assert int(gpu.extra["throttle_reasons"]) & 0x60 == 0x60
        assert gpu.temp_c is not None and gpu.temp_c >= 80
    words = [f.words for f in faults_of(node.gpus[0])]
    assert any("hardware thermal slowdown" in w for w in words)
    assert any(a.kind == "Fault" and "thermal" in a.message for a in node_alerts(node))


def test_the_fault_fields_the_demo_exporter_leaves_out_are_not_collected_never_healthy():
    cluster, _ = _demo()
    gpu = cluster.snapshot().node("gpu-h100-01").gpus[0]
    missing = [f for f in faults_of(gpu) if f.category == "not-collected"]
    assert missing and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in missing[0].fields
    assert "DCGM_FI_DEV_ROW_REMAP_PENDING" not in missing[0].fields
    # the thermal node's exporter alone serves the clock event reasons
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in missing[0].fields
    thermal = cluster.snapshot().node(THERMAL_NODE).gpus[0]
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" not in next(f for f in faults_of(thermal)
                                                           if f.category == "not-collected").fields


def test_the_demo_stays_seeded():
    a, _ = _demo()
    b, _ = _demo()
    assert a.snapshot().nodes == b.snapshot().nodes
