"""A whole drain run (run.run_drain) that takes a pod out of rotation, fast, on a recording API that re-reads
pods as the live backend does (a PodsReader) and patches labels: what it re-reads to count the serving pods
around the pod it takes out, the operator's put-back, and the words a pod left in place goes back in with.
The mutants named in each docstring are one-line bugs of gputui/ops/drain/run.py these tests kill (the
rotation hand-off the demo drains reach only with the whole demo snapshot)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path

import pytest

from gputui.backends.base import ConflictError
from gputui.ops.drain.events import DrainControl, EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.rotation_run import RECHECK_S, _TakenOut
from gputui.ops.steps import Ended, step
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import PodSelector
from tests.support.drain_api import Api, Drain, pod
from tests.support.maintenance_api import OperatorApi

SERVING = {"app": "llm", "serving": "true"}
SVC = PodSelector("Service", "ns", "llm", SERVING)
DEPLOY = PodSelector("Deployment", "ns", "llm", {"app": "llm"}, frozenset({"app"}))
SETTLE_S = 10.0


class RotationApi(Api):
    """Api, plus what a drain taking pods out of rotation needs: JSON patches of pod labels (tested against the
    pod's UID and values, as the apiserver does), and the live backend's cheap re-read of a few pods and of
    every pod of some namespaces, each call recorded."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, selectors=(SVC, DEPLOY), **kw)
        self.reread: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def pods_snapshot(self, keys: Collection[str], namespaces: Collection[str] = ()) -> ClusterSnapshot:
        self.reread.append((tuple(keys), tuple(namespaces)))
        whole = self.snapshot()
        wanted = set(keys)
        return dataclasses.replace(whole, pods=tuple(p for p in whole.pods
                                                     if p.key in wanted or p.namespace in namespaces))

    def patch_object(self, group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        current = self.pods[name]
        labels = dict(current.labels)
        for op in patch:
            path = op["path"]
            if path == "/metadata/uid":
                if op["value"] != current.uid:
                    raise ConflictError("the pod was replaced")
                continue
            key = path.removeprefix("/metadata/labels/").replace("~1", "/").replace("~0", "~")
            if op["op"] == "test" and labels.get(key) != op["value"]:
                raise ConflictError("the label changed")
            if op["op"] == "remove":
                labels.pop(key)
            elif op["op"] == "add":
                labels[key] = op["value"]
        self.pods[name] = dataclasses.replace(current, labels=labels)
        self.writes.append(("patch", name, [op["op"] for op in patch if op["op"] != "test"]))
        return {}


@pytest.fixture(autouse=True)
def _own_taken_out(monkeypatch):
    """Each test its own count of what the process holds out (the module's is shared by every drain)."""
    monkeypatch.setattr("gputui.ops.drain.rotation_run.TAKEN_OUT", _TakenOut())


def cluster(sessions: int | None = 3) -> RotationApi:
    """Pod a on n1 with live sessions; b and c serve the same Service on n2, so a may leave rotation."""
    return RotationApi((pod("a", labels=SERVING, service="llm", version="v1", ready=True),
                        pod("b", node="n2", labels=SERVING, service="llm", version="v1", ready=True),
                        pod("c", node="n2", labels=SERVING, service="llm", version="v1", ready=True)),
                       {"a": sessions, "b": 5, "c": 5})


def until(d: Drain, kind: EventKind, max_steps: int = 200) -> None:
    for _ in range(max_steps):
        got = step(d.gen)
        assert not isinstance(got, Ended), f"the drain ended before {kind}: {d.kinds()}"
        d.events.append(got)
        if got.kind is kind:
            return
    raise AssertionError(f"no {kind} in {d.kinds()}")


def rotation_writes(d: Drain) -> list[tuple[str, str, str]]:
    return [(a, t, p.get("why", "")) for a, t, p, _r in d.entries() if a.startswith("rotation")]


def test_the_pod_leaves_rotation_judged_on_its_namespaces_pods_reread_and_is_evicted_once_quiet(tmp_path):
    """The drain re-reads its own pods and, to count what serves beside the pod it takes out, every pod of that
    pod's namespace. Kills: `neighbourhood` empty or taken from pods without a switch (`is None`), `around()`
    given None or no namespaces, or the whole snapshot in place of the re-read (the pod then stays in for
    capacity: b and c are not in the re-read)."""
    api = cluster()
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=600))
    until(d, EventKind.OUT_OF_ROTATION)
    assert (("ns/a",), ("ns",)) in api.reread
    assert "serving" not in api.pods["a"].labels and api.pods["b"].labels == SERVING
    api.counts["a"] = 0
    report = d.run()
    assert report.outcome is Outcome.DRAINED and report.evicted == 1
    assert rotation_writes(d) == [("rotation-out", "pod/ns/a", "")]  # gone: nothing to put back


def test_a_put_back_the_operator_asks_for_is_done_said_and_never_undone_by_this_drain(tmp_path):
    """Kills: `take_put_backs` not asked or its answer dropped (`if asked` → `if not asked`), `rotation.tried |=
    asked` dropped (the drain takes the pod out again at its next check), the put-back's words or its keys
    (None: every pod held out) changed."""
    api = cluster()
    control = DrainControl()
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=600),
              control=control)
    until(d, EventKind.OUT_OF_ROTATION)
    control.put_back("ns/a")
    until(d, EventKind.IN_ROTATION)
    back = d.events[-1]
    assert (back.pod, back.message) == ("ns/a", "back in rotation (asked by the operator)")
    assert api.pods["a"].labels == SERVING
    for _ in range(int(3 * RECHECK_S / 2) + 2):  # looks past several capacity checks
        until(d, EventKind.TICK)
    assert api.pods["a"].labels == SERVING
    assert [e.kind for e in d.events].count(EventKind.OUT_OF_ROTATION) == 1
    api.counts["a"] = 0
    assert d.run().outcome is Outcome.DRAINED
    assert rotation_writes(d) == [("rotation-out", "pod/ns/a", ""), ("rotation-in", "pod/ns/a", "asked by the operator")]


def test_a_pod_left_in_place_goes_back_into_rotation_saying_so(tmp_path: Path):
    """Its sessions unknown at the deadline (no eviction chosen): the pod is held, and nothing owns it out of
    rotation any more. Kills: the "left in place" words changed or None, `only` dropped or given other states."""
    api = cluster(sessions=None)
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=60))
    report = d.run()
    assert report.outcome is Outcome.UNFINISHED and "a" in api.pods
    assert api.pods["a"].labels == SERVING
    assert rotation_writes(d) == [("rotation-out", "pod/ns/a", ""), ("rotation-in", "pod/ns/a", "left in place")]
    assert [e.message for e in d.events if e.kind is EventKind.IN_ROTATION] == ["back in rotation (left in place)"]


def test_a_pod_the_operator_keeps_in_before_it_left_rotation_is_never_taken_out(tmp_path):
    """Asked while the pod is still in rotation (kept in for capacity: nothing else serves), then capacity comes
    (b and c serve): this drain leaves it in. Kills: `rotation.tried |= asked` dropped."""
    api = cluster()
    b, c = api.pods.pop("b"), api.pods.pop("c")
    control = DrainControl()
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=600),
              control=control)
    until(d, EventKind.TICK)
    assert api.pods["a"].labels == SERVING  # kept in: it alone serves
    control.put_back("ns/a")
    api.pods.update(b=b, c=c)
    for _ in range(int(3 * RECHECK_S / 2) + 2):
        until(d, EventKind.TICK)
    assert api.pods["a"].labels == SERVING and EventKind.OUT_OF_ROTATION not in [e.kind for e in d.events]


def test_a_put_back_touches_only_the_pods_asked_for(tmp_path):
    """Two pods out of rotation, the operator asks one back: the other stays out. Kills: `keys=asked` → None."""
    api = cluster()
    api.pods["a2"] = pod("a2", labels=SERVING, service="llm", version="v1", ready=True)
    api.counts["a2"] = 3
    for name in ("d", "e"):  # enough serving on n2 for both to leave
        api.pods[name] = pod(name, node="n2", labels=SERVING, service="llm", version="v1", ready=True)
        api.counts[name] = 5
    control = DrainControl()
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=600),
              control=control)
    until(d, EventKind.OUT_OF_ROTATION)
    until(d, EventKind.OUT_OF_ROTATION)
    control.put_back("ns/a")
    until(d, EventKind.IN_ROTATION)
    until(d, EventKind.TICK)
    assert api.pods["a"].labels == SERVING and "serving" not in api.pods["a2"].labels


def test_a_pod_whose_eviction_failed_goes_back_into_rotation(tmp_path):
    """The eviction refused for good (not a PDB's 429): the pod stays, so it serves again. Kills: `only` without
    FAILED."""
    from gputui.backends.base import EvictionOutcome, EvictionResult

    api = cluster(sessions=0)

    def refuse(namespace, name, grace=None, uid=None):
        api.writes.append(("evict", name))
        return EvictionResult(EvictionOutcome.FAILED, "admission webhook denied the request")
    api.evict_pod = refuse  # type: ignore[method-assign]
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=600))
    report = d.run()
    assert report.outcome is Outcome.UNFINISHED and report.failed
    assert api.pods["a"].labels == SERVING
    assert rotation_writes(d) == [("rotation-out", "pod/ns/a", ""), ("rotation-in", "pod/ns/a", "left in place")]


def test_a_pod_put_back_stays_in_whatever_the_operator_asks_after(tmp_path):
    """a out of rotation, put back by the operator; then the operator asks for another pod (a2, in rotation):
    a stays in at every later capacity check. Kills: `rotation.tried |= asked` → `rotation.tried = asked` (the
    second ask forgets the first, and the drain takes a out again)."""
    api = cluster()
    api.pods["a2"] = pod("a2", labels=SERVING, service="llm", version="v1", ready=True)
    api.counts["a2"] = 3
    control = DrainControl()
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=600),
              control=control)
    until(d, EventKind.OUT_OF_ROTATION)
    out = d.events[-1].pod
    control.put_back(out)
    until(d, EventKind.IN_ROTATION)
    other = "ns/a2" if out == "ns/a" else "ns/a"
    control.put_back(other)
    for _ in range(int(3 * RECHECK_S / 2) + 2):
        until(d, EventKind.TICK)
    assert api.pods[out.split("/")[1]].labels == SERVING
    assert [e.pod for e in d.events if e.kind is EventKind.OUT_OF_ROTATION].count(out) == 1


class RotationOperatorApi(RotationApi, OperatorApi):
    """A requestor drain (the maintenance-operator's NodeMaintenance) over pods it takes out of rotation."""


def test_a_requestor_drain_whose_request_goes_puts_its_pods_back_into_rotation_saying_why(tmp_path):
    """The NodeMaintenance deleted under the drain (RequestGone): nothing owns the pod out of rotation any more, so
    it goes back in, with the words "the drain stopped". Kills: `put_back_all("the drain stopped", pods)` with
    None or other words, or no pods."""
    api = RotationOperatorApi((pod("a", labels=SERVING, service="llm", version="v1", ready=True),
                               pod("b", node="n2", labels=SERVING, service="llm", version="v1", ready=True),
                               pod("c", node="n2", labels=SERVING, service="llm", version="v1", ready=True)),
                              {"a": 3, "b": 5, "c": 5})
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(rotation_settle_s=SETTLE_S, session_deadline_s=600,
                                                       maintenance_namespace="maint"))
    until(d, EventKind.OUT_OF_ROTATION)
    api.objects.clear()  # the request deleted by someone else
    report = d.run()
    assert "was deleted" in report.reason
    assert api.pods["a"].labels == SERVING
    assert rotation_writes(d) == [("rotation-out", "pod/ns/a", ""), ("rotation-in", "pod/ns/a", "the drain stopped")]
