"""Where only a number showed, the fault in words (issue 37 item 1): a node's alerts name the worst fault in
words that fit an 80-column row, describe (`i`) lists each GPU's faults with the action, and `gputui nodes -o
json` carries them per GPU. Each test here fails on the code before: it showed `XID 8`, a failed row remap
raised nothing, describe had no faults, the JSON no `faults`."""

from __future__ import annotations

import io
import json

from rich.console import Console

from gputui.policy.health import Severity, node_alerts
from gputui.policy.problems import problem_of
from gputui.present.cells import Palette
from gputui.present.node_describe import describe
from gputui.vocabulary.gpu_faults import NOT_COLLECTED, THROTTLE_FAULTS, explain_field
from gputui.vocabulary.gpu_metrics import FAULT_FIELDS, Figures
from gputui.vocabulary.model import Gpu, Node
from tests.support.gputui_cli import run

SOUND = {f: 0.0 for f in FAULT_FIELDS} | {"throttle_reasons": 0.0, "pcie_replays": 0.0}  # all read, all zero


def node(*gpus: Gpu) -> Node:
    return Node(name="gpu-x", ready=True, unschedulable=False, gpu_product="NVIDIA-H100-80GB-HBM3",
                gpu_capacity=8, gpu_allocatable=8, driver_version="550.127.05", gpus=gpus)


def test_an_xid_alert_names_the_fault_in_words_and_its_verdict_sets_the_severity():
    [alert] = node_alerts(node(Gpu(3, "u3", xid=8)))
    assert alert.message == "GPU 3: XID 8 (GPU stopped processing: restart the app)"  # was `GPU 3: XID 8`
    assert alert.severity is Severity.HEALTH  # NVIDIA: restart the application; the GPU is usable
    [unknown] = node_alerts(node(Gpu(0, "u0", xid=999)))
    assert unknown.message == "GPU 0: XID 999 (unknown: not in NVIDIA's catalog)"
    assert unknown.severity is Severity.GPU_LOST  # unknown is never taken lightly


def test_a_field_fault_raises_an_alert_and_the_row_names_the_worst_in_words_at_80_columns():
    failed = Gpu(1, "u1", extra=Figures(SOUND | {"DCGM_FI_DEV_ROW_REMAP_FAILURE": 1.0}))
    throttled = Gpu(2, "u2", extra=Figures(SOUND | {"throttle_reasons": 0x40}))
    counted = Gpu(4, "u4", extra=Figures(SOUND | {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 9.0}))  # informational
    alerts = node_alerts(node(failed, throttled, counted))
    assert [a.message for a in alerts] == ["GPU 1: row remap failed: cordon, drain, RMA",
                                           "GPU 2: hardware thermal slowdown: check cooling"]
    problem = problem_of(alerts)
    assert problem is not None and problem.kind == "health" and problem.detail == alerts[0].message
    # the XID names the cause when the node has one, whatever the fields say
    lost = Gpu(5, "u5", xid=79)
    worst = problem_of(node_alerts(node(failed, lost)))
    assert worst is not None and worst.detail == "GPU 5: XID 79 (fallen off the bus: reboot the node)"
    # every alert line a field or a throttle bit can raise fits an 80-column row with a two-digit GPU
    lines = [f"GPU 15: {alert}" for *_, alert in THROTTLE_FAULTS.values()]
    lines += [f"GPU 15: {fault.short}" for f in FAULT_FIELDS if (fault := explain_field(f, 123456.0))]
    assert max(map(len, lines)) <= 80, max(lines, key=len)


def test_a_gpu_that_reports_no_fault_field_raises_no_alert_but_is_not_called_sound():
    bare = Gpu(0, "u0", util_pct=50.0)  # a read that brought none of the fault fields (the demo, a summary)
    assert node_alerts(node(bare)) == []
    text = _describe(node(bare))
    assert f"GPU 0 {NOT_COLLECTED}: DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in text


def _describe(n: Node) -> str:
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(describe(n, 85.0, Palette()))
    return console.export_text()


def test_describe_lists_each_gpus_faults_with_the_action_and_what_is_not_collected():
    partial = {k: v for k, v in SOUND.items() if not k.startswith("DCGM_FI_DEV_ECC")}  # an exporter without ECC
    text = _describe(node(Gpu(0, "u0", xid=13, extra=Figures(partial)),
                          Gpu(1, "u1", extra=Figures(partial | {"DCGM_FI_DEV_ROW_REMAP_PENDING": 1.0}))))
    assert "GPU faults, worst first" in text
    assert "GPU 0 application: XID 13 ROBUST_CHANNEL_GR_EXCEPTION" in text
    assert "tell the model's owner; do not drain" in text
    assert "GPU 1 reset-gpu: a memory row remap is pending: it takes effect at the next GPU reset" in text
    assert "→ drain the GPU's pods and reset it" in text
    assert "every GPU not-collected: DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in text
    clean = _describe(node(Gpu(0, "u0", extra=Figures(SOUND))))
    assert "GPU faults, worst first\nnone" in clean


def test_nodes_json_lists_each_gpus_faults_on_the_demo(tmp_path):
    out = run("nodes", "--demo", "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    nodes = {n["name"]: n for n in json.loads(out.stdout)}
    gpus = {g["index"]: g for g in nodes["gpu-h100-07"]["gpus"]}
    lost = gpus[5]["faults"][0]
    assert lost["code"] == 79 and lost["category"] == "hardware"
    assert "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in lost["words"] and "RESTART_BM" in lost["action"]
    for node_record in nodes.values():
        for gpu in node_record["gpus"]:
            assert gpu["faults"], "an empty list reads as sound: the demo collects no ECC or NVLink field"
            gap = gpu["faults"][-1]
            assert gap["category"] == NOT_COLLECTED and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in gap["fields"]
            # a GPU that reads (not fallen off the bus, its node up) reports the row-remap fields too
            assert ("DCGM_FI_DEV_ROW_REMAP_FAILURE" in gap["fields"]) is (gpu["util_pct"] is None)
            assert all({"words", "action", "category"} <= set(f) and ("code" in f or "field" in f)
                       for f in gpu["faults"])
