"""The placement preview as a drain plan carries it (gputui.ops.drain.plan): one preview per snapshot, batch
and set of moving pods (a plan screen's toggles recompute the plan, not the preview), where the batch's guard
stops for a pod that would be stranded, and the preview in JSON. Pure."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.ops.drain.placement import CAVEAT, Placement, Preview, Verdict, preview
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod

if TYPE_CHECKING:  # plan.py imports this module; these are its types
    from gputui.ops.drain.batch_plan import BatchPlan
    from gputui.ops.drain.plan import PodPlan


def previewed(snapshot: ClusterSnapshot, batch: Iterable[str], moving: Sequence[InferencePod]) -> Preview:
    """The preview of these pods leaving this batch, once per snapshot (ClusterSnapshot.derived)."""
    batch = frozenset(batch)
    key = ("placement", batch, tuple(p.key for p in moving))
    return snapshot.derived(key, lambda: preview(snapshot, batch, moving))


def strands(placements: Iterable[Placement | None], accepted: Collection[str]) -> list[Placement]:
    """The placements that leave a pod with nowhere to go, the operator's accepted ones aside."""
    return [p for p in placements if p is not None and p.stranded and p.pod.key not in accepted]


def strand_words(stranded: Sequence[Placement]) -> str:
    """What the guard says of the pods it would strand: the first by name and why, and how many more."""
    first = stranded[0]
    more = f" (and {len(stranded) - 1} more)" if len(stranded) > 1 else ""
    return f"{first.pod.key} would have nowhere to go: {first.why}{more}"


def placement_json(placement: Placement | None) -> dict | None:
    if placement is None:
        return None
    return {"verdict": placement.verdict.value, "nodes": placement.count, "named": list(placement.nodes),
            "sure": placement.sure, "contended_with": list(placement.contended),
            "why": placement.why or None,
            "excluded": [{"rule": e.rule, "nodes": e.nodes, "words": e.words} for e in placement.excluded],
            "stranded": placement.verdict is Verdict.NOWHERE}


def eviction_order(plans: Iterable[PodPlan]) -> list[PodPlan]:
    """The pods a node's drain recreates, in the order it evicts them: at once first, then those it waits on."""
    plans = [p for p in plans if p.recreated]
    return [p for p in plans if p.step.value == "evict"] + [p for p in plans if p.step.value != "evict"]


def with_placement(plans: Iterable[PodPlan], preview: Preview) -> tuple[PodPlan, ...]:
    return tuple(replace(p, placement=preview.of(p.pod.key)) if p.recreated else p for p in plans)


def reached_notes(snapshot: ClusterSnapshot, preview: Preview, reached: Collection[str]) -> list[str]:
    """The preview's summary for the pods of the nodes the run starts, and a line for those past its stop."""
    lines = Preview(tuple(p for p in preview.placements if p.pod.node in reached)).describe(snapshot)
    past = [p for p in preview.placements if p.pod.node not in reached]
    if past:
        lines.append(f"{len(past)} pod{'s' if len(past) != 1 else ''} past the capacity guard's stop "
                     f"({sum(p.stranded for p in past)} with nowhere to go): not moved, the run stops before them")
    return lines


def batch_lines(batch: BatchPlan) -> list[str]:
    """The batch plan's lines on placement: the preview's summary, the block, where the guard stops for it."""
    lines = list(batch.placement_notes)
    waiting = batch.stranding
    if waiting:
        lines.append(f"BLOCKED: {len(waiting)} pod{'s' if len(waiting) != 1 else ''} would have nowhere to go; "
                     f"accept {'them' if len(waiting) != 1 else 'it'} to drain anyway (left Pending)")
    names = [p.node for p in batch.plans]
    if batch.placement_stop is not None and batch.placement_stop != batch.stop_before:
        done = names[: names.index(batch.placement_stop)]
        lines.append(f"the placement guard would stop before {batch.placement_stop}: its drain would strand a pod; "
                     f"{len(done)} of {len(names)} nodes drained" + (f" ({', '.join(done)})" if done else ""))
    return lines


def batch_placement_json(batch: BatchPlan) -> dict:
    return {"caveat": CAVEAT, "stranded": [p.pod.key for p in batch.stranded], "accepted": sorted(batch.accepted),
            "blocking": [p.pod.key for p in batch.stranding], "blocked": batch.blocked_by_placement,
            "notes": list(batch.placement_notes)}
