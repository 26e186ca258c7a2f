"""What the wait of a pod that stays in rotation comes to (issue 33, item 3): its arrival rate, read from its
engine's counters, and the sessions it will still hold at its deadline, said in the plan before anything is
written. Pure: the rates are read by the caller (backends.base.ArrivalsReader) and given here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gputui.backends.base import ArrivalsReader, BackendError
from gputui.ops.drain.batch_plan import BatchPlan
from gputui.ops.drain.plan import DrainPlan, PodPlan
from gputui.vocabulary.model import InferencePod
from gputui.vocabulary.sessions import Arrivals, SessionState

ARRIVING = "new sessions keep arriving"


def _num(x: float) -> str:
    """Two significant digits below 10 (a rate of 0.04/s is no "0.0"), whole numbers above."""
    return f"{x:.2g}" if abs(x) < 10 else f"{x:.0f}"


def outcome(p: PodPlan, arrivals: Arrivals | None, deadline_s: float) -> str:
    """The pod's arrival rate and what its deadline finds, in words ("" when it leaves rotation)."""
    if p.rotation is not None or ARRIVING not in p.rotation_note or p.switch is not None:
        return ""  # out of rotation, or kept in only until a replacement serves: its deadline finds no crowd
    live = p.sessions.live if p.sessions.state is SessionState.KNOWN else None
    if arrivals is not None and arrivals.rate_per_s <= 0:
        arrivals = None  # nothing finished in the window: a young series, or traffic stopped; no rate to go on
    if arrivals is None:
        if live is None:
            return "arrival rate unknown (no request counter read)"
        return f"arrival rate unknown; it holds {live} sessions now and likely about as many at its deadline"
    held, mean = arrivals.held(), arrivals.mean_s
    rate = f"about {_num(arrivals.rate_per_s)} new sessions/s"
    if held is None or mean is None:
        expect = f"{live} sessions now" if live is not None else "its count unknown"
        return f"{rate}; {expect}, and about as many at its deadline"
    return (f"{rate} held {_num(mean)}s on average: it reaches its deadline ({deadline_s:.0f}s) with "
            f"about {round(held)} sessions, cut then unless moved first")


def with_arrivals(plan: DrainPlan, rates: Mapping[str, Arrivals]) -> DrainPlan:
    """The plan with each pod's outcome added to its note and to its warning."""
    pods, warnings = [], list(plan.warnings)
    for p in plan.pods:
        said = outcome(p, rates.get(p.pod.key), plan.options.session_deadline_s)
        if said:
            old = f"{p.pod.key}: {p.rotation_note}"
            p = replace(p, rotation_note=f"{p.rotation_note}; {said}")
            warnings = [f"{p.pod.key}: {p.rotation_note}" if w == old else w for w in warnings]
        pods.append(p)
    return replace(plan, pods=tuple(pods), warnings=tuple(warnings))


def stuck_pods(batch: BatchPlan) -> list[InferencePod]:
    """The pods no label can take out of rotation, with new sessions arriving: those whose rates the plan shows."""
    return [p.pod for plan in batch.plans for p in plan.pods
            if p.rotation is None and p.switch is None and ARRIVING in p.rotation_note]


def with_rates(batch: BatchPlan, rates: Mapping[str, Arrivals], failed: str = "") -> BatchPlan:
    """Each plan with its pods' rates; `failed`: why they could not be read (said once per plan)."""
    plans = [replace(plan, warnings=(*plan.warnings, f"arrival rates unknown: {failed}")) if failed else plan
             for plan in batch.plans]
    return replace(batch, plans=tuple(with_arrivals(plan, rates) for plan in plans))


def batch_with_arrivals(batch: BatchPlan, reader: object) -> BatchPlan:
    """Each plan with its pods' arrival rates, read in one go when the reader can (the live backend); a
    failed read leaves every rate unknown and says why, once."""
    waiting = stuck_pods(batch)
    if not waiting or not isinstance(reader, ArrivalsReader):
        return batch
    try:
        return with_rates(batch, reader.arrivals(waiting))
    except BackendError as exc:
        return with_rates(batch, {}, str(exc))
