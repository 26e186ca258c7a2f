"""The drain plan screen's text (drain_plan.render_plan) names what the EvictionRequest API says of the batch's
pods: a pod another responder is evicting, as a blocker left to it, and each pending EvictionRequest."""

from __future__ import annotations

from rich.console import Console

from gputui.backends.kube_evictions import eviction_record, eviction_request_record
from gputui.ops.drain.batch_plan import plan_batch
from gputui.ops.drain.options import DrainOptions
from gputui.present.cells import Palette
from gputui.snapshot import ClusterSnapshot
from gputui.ui.screens.drain_plan import render_plan
from gputui.vocabulary.disruptions import ActorObjects
from gputui.vocabulary.model import InferencePod, Node
from tests.support.eviction_objects import READ, REQUESTER, RESPONDER, T0, eviction_obj, request_obj


def pod(name: str) -> InferencePod:
    return InferencePod(namespace="ns", name=name, uid=f"uid-{name}", node="n1", owner_kind="ReplicaSet",
                        gpu_request=1, labels={"app": "llm"})


def test_the_plan_screen_says_which_pod_is_left_to_another_responder_and_who_asks():
    actors = ActorObjects(reads=READ, eviction_requests=(eviction_request_record(request_obj("b-1", "b", "uid-b")),),
                          evictions=(eviction_record(eviction_obj("a", "a", "uid-a")),))
    snap = ClusterSnapshot(T0 + 60, "t", nodes=(Node("n1", True, False, "H100", 8, 8), Node("n2", True, False, "H100", 8, 8)),
                           pods=(pod("a"), pod("b")), actors=actors)
    console = Console(width=200, record=True, color_system=None)
    console.print(render_plan(plan_batch(snap, ["n1"], DrainOptions()), Palette()))
    text = console.export_text()
    assert f"left to another responder: ns/a: its eviction is handled by {RESPONDER} (Active" in text
    assert f"ns/b: EvictionRequest by {REQUESTER} pending since" in text
