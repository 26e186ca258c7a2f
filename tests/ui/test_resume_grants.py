"""`R` resumes interrupted drains only when the identity may do what each of them needs: a drain resumed as the
maintenance-operator's requestor also withdraws its NodeMaintenance (abort, uncordon), so a role without
`delete nodemaintenances` is told so by name before anything is written, as `gputui drain` says it. On the code
before, `R` checked only what a plain drain needs (cordon, evict) and started the requestor drain all the same."""

from __future__ import annotations

import pytest

from gputui.ops.drain.options import BY, DEADLINE, OPTIONS, PHASE, DrainOptions
from tests.ui.pilot import loaded, wait_for

NODE = "gpu-h100-02"


async def _press_resume(app, pilot, options: DrainOptions, permissions: dict[str, bool]) -> tuple[list, list[str]]:
    """An interrupted drain of NODE with these options, the identity's review answers, then `R`: what was
    started, and what the operator was told."""
    await loaded(pilot)
    app.backend.writer.annotate_node(NODE, {PHASE: "waiting", BY: "alice@laptop", OPTIONS: options.to_json(),
                                            DEADLINE: f"{app.clock() + 3600:.0f}"})
    app.backend.permissions = permissions
    app.poll_now()
    await wait_for(pilot, lambda: (node := app.snapshot.node(NODE)) is not None and node.annotations.get(PHASE),
                   what="the interrupted drain in a snapshot")
    started: list = []
    app.screen._start = lambda *args, **kw: started.append(args)
    before = len(app._notifications)
    await pilot.press("R")
    await pilot.pause()
    return started, [str(n.message) for n in list(app._notifications)[before:]]


async def test_a_requestor_drain_is_not_resumed_by_an_identity_that_may_not_withdraw_its_nodemaintenance(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        started, said = await _press_resume(app, pilot, DrainOptions(maintenance_namespace="nvidia-maintenance"),
                                            {"cordon": True, "evict": True, "nodemaintenance_create": True,
                                             "nodemaintenance_delete": False})
        assert started == []
        assert said == ["your identity may not delete nodemaintenances: drain via NodeMaintenance is unavailable"]


@pytest.mark.parametrize("maintenance_namespace, permissions", [
    ("nvidia-maintenance", {"cordon": True, "evict": True, "nodemaintenance_create": True,
                            "nodemaintenance_delete": True}),
    # A plain drain needs no NodeMaintenance: a role without it resumes it.
    ("", {"cordon": True, "evict": True, "nodemaintenance_create": False, "nodemaintenance_delete": False}),
])
async def test_a_drain_is_resumed_when_the_identity_may_do_what_it_needs(app_factory, maintenance_namespace,
                                                                         permissions):
    app = app_factory()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        started, said = await _press_resume(app, pilot, DrainOptions(maintenance_namespace=maintenance_namespace),
                                            permissions)
        assert [args[0] for args in started] == [[NODE]], said
        assert not any("may not" in m for m in said)
