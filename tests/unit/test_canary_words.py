"""What the wallboard counts as canaries, the services table says (issue 35: `Canaries 2` while every version
said `rolled out`): a version rolled out whose traffic is the minority of a split says `canary at 10%`."""

from __future__ import annotations

from gputui.backends.demo import DemoCluster
from gputui.policy.figures import canary_in_flight, figures
from gputui.present.cells import Palette
from gputui.present.columns import SERVICE_COLUMNS, service_rows
from tests.demo_clock import ManualClock


def test_each_canary_the_wallboard_counts_is_named_in_its_rows():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    rows = service_rows(snap, Palette(), SERVICE_COLUMNS)
    rollout = [key for key, *_ in SERVICE_COLUMNS].index("rollout")
    said = {key: str(cells[rollout]) for key, cells in rows.items()}
    assert said["llm/llama-3-70b-instruct@v2"] == "canary at 10%" and said["llm/llama-3-70b-instruct@v1"] == "rolled out"
    counted = [s for s in snap.services if canary_in_flight(s)]
    assert len(counted) == figures(snap, 85.0).canaries == 2
    for svc in counted:  # each one's rows say it is not simply "rolled out"
        assert any(said[f"{svc.key}@{v.name}"] != "rolled out" for v in svc.versions), svc.key
