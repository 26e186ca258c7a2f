"""`gputui services`: every service as `gputui shift` names it, with its router, versions and sessions; a
session count that cannot be read is said, never summed as 0."""

from __future__ import annotations

import json

from gputui.cli.services import service_record
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod, InferenceService, ServiceVersion
from tests.support.gputui_cli import run


def test_the_demo_services_as_json_name_what_shift_takes(tmp_path):
    done = run("services", "--demo", "-o", "json", home=tmp_path)
    assert done.returncode == 0, done.stderr
    services = {s["service"]: s for s in json.loads(done.stdout)}
    assert set(services) == {"llm/llama-3-70b-instruct", "llm/qwen2-72b", "llm/mistral-7b", "llm/codellama-34b",
                             "embeddings/bge-large", "llm/llama-3-8b-instruct", "embeddings/gte-base",
                             "llm/deepseek-r1-distill-70b"}
    mistral = services["llm/mistral-7b"]
    assert mistral["simulated"] is True and mistral["router"] == {"kind": "VirtualService", "name": "mistral-7b"}
    canary = next(v for v in mistral["versions"] if v["name"] == "canary")
    assert (canary["weight"], canary["share_pct"], canary["replicas"]["ready"], canary["replicas"]["desired"]) == \
        (20, 20.0, 1, 2)
    assert len(canary["pods"]) == 2 and all(p["node"] for p in canary["pods"])
    dry = run("shift", "llm/mistral-7b", "--to", "canary=15", "--dry-run", "--demo", home=tmp_path)
    assert dry.returncode == 0, dry.stderr
    table = run("services", "--demo", home=tmp_path)
    assert table.returncode == 0 and table.stdout.startswith("# SIMULATED")


def test_unknown_sessions_are_said_not_summed_as_zero():
    svc = InferenceService("llm", "chat", (ServiceVersion("v1", None),), "", "")
    pods = (InferencePod("llm", "a", "ua", "n1", service="chat", version="v1", session_signal=True),
            InferencePod("llm", "b", "ub", "n1", service="chat", version="v1", session_signal=True))
    record = service_record(ClusterSnapshot(0.0, "t", pods=pods, services=(svc,),
                                            session_counts={("llm", "a"): 4}), svc)
    assert record["versions"][0]["sessions"] == {"known": 4, "pods_unknown": 1}
