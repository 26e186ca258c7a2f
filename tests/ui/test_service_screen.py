"""enter on a service: its screen (versions, pods, nodes, sessions, the gates' figures read in a worker, the
audit history), w from it to the shift dialog; a shift made shows in its history."""

from __future__ import annotations

from gputui.ui.screens.traffic_shift import TrafficShiftScreen
from tests.ui.pilot import wait_for
from tests.ui.service_kit import LLAMA, MISTRAL, body_text, open_service, weights


async def test_enter_on_a_service_shows_it_in_full(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_service(pilot)
        assert screen.key == MISTRAL
        text = body_text(screen)
        assert "router VirtualService llm/mistral-7b" in text
        canary = next(line for line in text.splitlines() if line.startswith("canary"))
        assert "20%" in canary and "1/2" in canary and "0.20%" in canary  # share, ready pods, the gates' error ratio
        pods = [p for p in app.snapshot.pods if p.service == "mistral-7b"]
        assert pods and all(p.name in text and p.node in text for p in pods)
        assert "no shift, canary or scale-down of this service" in text


async def test_w_opens_the_shift_dialog_and_the_shift_shows_in_the_history(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_service(pilot)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, TrafficShiftScreen) and app.screen.plan is not None)
        await pilot.press("minus", "enter")  # the canary down 10 points: never blocked
        await wait_for(pilot, lambda: getattr(app.screen, "confirm_plan", None) is not None)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: "shift  canary=10 stable=90" in body_text(screen))


async def test_g_runs_a_guided_canary_and_b_rolls_it_back_at_once(app_factory, tmp_path):
    """v2 scaled up first (its 1 of 8 pods cannot take 25%); g, y: the canary takes its first step from 10% to
    25%; space pauses it; b sends traffic back to the start at once, without a question, and v1's pods stay."""
    from gputui.backends.demo.scenario import POD_START_S

    app = app_factory()
    app.canary_poll_s = 0.05
    cluster = app.backend.writer
    cluster.patch_object("apps", "v1", "deployments", "llm", "llama-3-70b-instruct-v2", {"spec": {"replicas": 4}},
                         subresource="scale")
    app.test_clock.advance(POD_START_S + 5)
    v1_pods = {p.uid for p in cluster.snapshot().pods if p.service == "llama-3-70b-instruct" and p.version == "v1"}
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_service(pilot, LLAMA)
        await pilot.press("g")
        await wait_for(pilot, lambda: app.screen is not screen)
        assert "v2 to 25% → 50% → 100%, compared with v1" in str(app.screen.query_one("#dialog-body").content)
        await pilot.press("y")
        await wait_for(pilot, lambda: weights(app) == {"v1": 75, "v2": 25})
        await wait_for(pilot, lambda: "holding at 25%" in body_text(screen))
        await pilot.press("space")
        await wait_for(pilot, lambda: "guided canary paused at 25%" in body_text(screen))
        await pilot.press("b")
        await wait_for(pilot, lambda: weights(app) == {"v1": 90, "v2": 10})
        await wait_for(pilot, lambda: "guided canary rolled back: by the operator at 25%" in body_text(screen))
        assert v1_pods <= {p.uid for p in cluster.snapshot().pods if p.version == "v1"}
        actions = [e["action"] for e in app.audit.entries()]
        assert actions == ["canary-start", "shift", "shift", "canary-end"]


async def test_b_after_a_canary_asks_and_goes_back_to_its_start_and_u_undoes_a_shift(app_factory):
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_service(pilot, MISTRAL)
        await pilot.press("U")  # nothing shifted yet: said, nothing sent
        await wait_for(pilot, lambda: any("no shift of llm/mistral-7b" in n.message for n in app._notifications))
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, TrafficShiftScreen) and app.screen.plan is not None)
        await pilot.press("minus", "enter")
        await wait_for(pilot, lambda: getattr(app.screen, "confirm_plan", None) is not None)
        await pilot.press("y")
        await wait_for(pilot, lambda: weights(app, MISTRAL) == {"stable": 90, "canary": 10})
        await pilot.press("U")
        await wait_for(pilot, lambda: app.screen is not screen, what=lambda: [n.message for n in app._notifications])
        body = str(app.screen.query_one("#dialog-body").content)
        assert "undoes the shift of" in body and "blocked: canary would get 20% of new sessions" in body
        assert "anyway?" in str(app.screen.query_one("#dialog-title").content)  # confirming is the force
        await pilot.press("y")
        await wait_for(pilot, lambda: weights(app, MISTRAL) == {"stable": 80, "canary": 20})
