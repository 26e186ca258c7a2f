"""One look at a drain's pods (run._poll), through whole runs on the recording API: each eviction answer's audit
result and words, the pods looked at after one is left in place, how many pods with unknown counts were evicted,
and a PDB's refusal naming every budget over the pod. The mutants named in each docstring survived the earlier
tests (docs/mutation.md)."""

from __future__ import annotations

import dataclasses

from gputui.backends.base import EvictionOutcome, EvictionResult
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.options import DrainOptions
from gputui.ops.drain.report import Outcome
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import Budget
from tests.support.drain_api import T0, Api, Drain, pod


def answering(api: Api, outcome: EvictionOutcome, reason: str, pod_gone: bool = True) -> None:
    """Every eviction answered so; the pod gone from the API after it (or still there)."""
    def evict(namespace, name, grace=None, uid=None):
        api.writes.append(("evict", name))
        if pod_gone:
            api.pods.pop(name, None)
        return EvictionResult(outcome, reason)
    api.evict_pod = evict  # type: ignore[method-assign]


def results(d: Drain) -> list[tuple[str, dict, str]]:
    return [(t, p, r) for a, t, p, r in d.entries() if a == "evict"]


def test_an_eviction_answered_gone_is_audited_as_gone(tmp_path):
    """Kills: the GONE word changed ("XXgoneXX", "GONE")."""
    api = Api((pod("a"),), {"a": 0})
    answering(api, EvictionOutcome.GONE, "pods \"a\" not found")
    d = Drain(api, tmp_path / "a.jsonl")
    assert d.run().outcome is Outcome.DRAINED
    assert [r for _t, _p, r in results(d)] == ["gone"]
    assert [e.message for e in d.events if e.kind is EventKind.GONE] == ["already gone"]


def test_an_eviction_answered_replaced_with_nothing_standing_names_the_uid_it_asked_for(tmp_path):
    """A 409 on the UID, and the API holds no pod under the name any more: the audit keeps the UID asked for and
    that nothing stands. Kills: `standing is not None or outcome is REPLACED` → `and`."""
    api = Api((pod("a"),), {"a": 0})
    answering(api, EvictionOutcome.REPLACED, "the pod's UID changed")
    d = Drain(api, tmp_path / "a.jsonl")
    d.run()
    (_target, params, result), = results(d)
    assert result.startswith("refused: replaced under its name")
    assert (params["uid"], params["standing"]) == ("uid-a", None)


def test_an_eviction_answered_without_words_says_evicted(tmp_path):
    """Kills: `reason or "evicted"` → another default."""
    api = Api((pod("a"),), {"a": 0})
    answering(api, EvictionOutcome.EVICTED, "")
    d = Drain(api, tmp_path / "a.jsonl")
    d.run()
    assert [e.message for e in d.events if e.kind is EventKind.EVICTED] == ["evicted"]


def test_each_pod_evicted_with_its_count_unknown_is_counted(tmp_path):
    """Two pods whose counts are unknown at their deadline, evicted because the operator chose so: the report
    says two. Kills: `report.unknown_cut_pods += 1` → `= 1`."""
    api = Api((pod("a"), pod("b")), {"a": None, "b": None})
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(session_deadline_s=30, evict_unknown_at_deadline=True))
    report = d.run()
    assert report.outcome is Outcome.DRAINED and report.unknown_cut_pods == 2


def test_a_pod_left_in_place_does_not_stop_the_look_at_the_pods_after_it(tmp_path):
    """a's count is unknown at the deadline (left in place); b goes quiet at that same moment: b is evicted in the
    same look, not one poll later. Kills: the `continue` after HELD → `break`."""
    api = Api((pod("a"), pod("b")), {"a": None, "b": 2})
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(session_deadline_s=30))

    def quiet_at_deadline(api: Api) -> None:
        if d.clock() >= T0 + 30:
            api.counts["b"] = 0
    api.on_read = quiet_at_deadline
    d.run()
    kinds = [(e.kind, e.pod) for e in d.events if e.kind in (EventKind.HELD, EventKind.EVICTED, EventKind.TICK)]
    held = kinds.index((EventKind.HELD, "ns/a"))
    assert kinds[held + 1] == (EventKind.EVICTED, "ns/b")


def test_a_pdbs_refusal_names_every_budget_over_the_pod(tmp_path):
    """Kills: the budgets' separator changed."""
    class Budgeted(Api):
        def snapshot(self) -> ClusterSnapshot:
            return dataclasses.replace(super().snapshot(), budgets=(
                Budget("ns", "llm-pdb", {"app": "llm"}, min_available="1", current_healthy=1, desired_healthy=1),
                Budget("ns", "all-pdb", {}, max_unavailable="0")))

    api = Budgeted((pod("a"),), {"a": 0})
    api.blocked.add("a")
    d = Drain(api, tmp_path / "a.jsonl", DrainOptions(session_deadline_s=10))
    for _ in range(30):
        d.events.append(next(d.gen))
        if any(e.kind is EventKind.BLOCKED for e in d.events):
            break
    blocked = next(e for e in d.events if e.kind is EventKind.BLOCKED)
    budgets = Budgeted().snapshot().budgets
    assert blocked.message == f"Cannot evict pod ({budgets[0].describe()}; {budgets[1].describe()})"
