"""The guided canary's dialog tells the truth before `y` (issue 35): the demo's mistral-7b canary (20% on 1 of 7
ready pods) cannot take 25%, and the dialog said `25% → 50% → 100%`; right after `y` the canary ended "held",
space answered "no canary is running" and the force it named did not exist. Now the dialog says which step
would be held and why and offers `f`; a held canary waits with its keys live, and `f` takes its step."""

from __future__ import annotations

from gputui.ui.screens.canary_confirm import CanaryConfirm
from tests.ui.pilot import wait_for
from tests.ui.service_kit import MISTRAL, body_text, open_service, weights


async def test_the_dialog_says_which_step_it_would_hold_and_a_held_canary_waits_for_the_operator(app_factory):
    app = app_factory()
    app.canary_poll_s = 0.05
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_service(pilot, MISTRAL)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, CanaryConfirm))
        body = str(app.screen.query_one("#dialog-body").content)
        assert "25%: held now: canary would get 25% of new sessions on 14.3% of the ready pods" in body
        assert "(f passes it)" in body and "50%: not reached while 25% is held" in body
        assert "start, forcing past the capacity rule" in str(app.screen.query_one("#dialog-keys").content)
        await pilot.press("y")
        await wait_for(pilot, lambda: "guided canary held before its first step" in body_text(screen))
        text = body_text(screen)
        assert "space tries again, f forces it, x stops, b rolls back" in text
        assert app.canaries[MISTRAL].finished is False  # running, held: not over
        await pilot.press("space")  # tries again (it still cannot): never "no canary is running"
        await pilot.pause()
        assert app.canaries[MISTRAL].finished is False
        await pilot.press("f")
        await wait_for(pilot, lambda: weights(app, MISTRAL) == {"stable": 75, "canary": 25})
        await wait_for(pilot, lambda: "step 25%" in body_text(screen))
        await pilot.press("x")
        await wait_for(pilot, lambda: app.canaries[MISTRAL].finished)
        assert weights(app, MISTRAL) == {"stable": 75, "canary": 25}  # stopped where it was
