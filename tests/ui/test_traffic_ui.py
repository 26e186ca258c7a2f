"""The traffic shift dialog, driven by Pilot on the seeded demo cluster."""


from gputui.ui.screens.traffic_shift import Mode, TrafficShiftScreen
from tests.support.audit_lines import written
from tests.ui.pilot import loaded, wait_for

LLAMA = "llm/llama-3-70b-instruct"


async def open_shift(pilot, key: str = LLAMA) -> TrafficShiftScreen:
    await loaded(pilot)
    screen = TrafficShiftScreen(key)
    pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: pilot.app.screen is screen and screen.plan is not None)
    return screen


def weights(app, key: str = LLAMA) -> dict[str, int]:
    return {v.name: v.weight for v in app.snapshot.service(key).versions}


def audit_lines(tmp_path) -> list[dict]:
    return written(tmp_path / "audit.jsonl")


async def test_step_the_canary_confirm_and_apply(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_shift(pilot)
        assert screen.chosen == "v2"  # the canary (the smallest share) is chosen first
        assert weights(app) == {"v1": 90, "v2": 10}
        await pilot.press("plus")
        await pilot.pause()
        assert {v.name: v.target_pct for v in screen.plan.versions} == {"v1": 80.0, "v2": 20.0}
        assert weights(app) == {"v1": 90, "v2": 10}  # nothing written while editing
        await pilot.press("enter")  # reads the route, then asks
        await wait_for(pilot, lambda: screen.mode is Mode.CONFIRM)
        assert screen.confirm_plan.patch is not None and screen.confirm_plan.route_read
        # v2 has 1 of the 8 ready pods: 20% of new sessions is more than its share, so y is refused...
        assert "scale it up first" in screen.confirm_plan.blockers[0]
        await pilot.press("y")
        await pilot.pause()
        assert weights(app) == {"v1": 90, "v2": 10}
        assert any("press f to shift anyway" in n.message for n in app._notifications)
        await pilot.press("f")  # ...and f, the operator's informed choice, goes ahead
        await wait_for(pilot, lambda: weights(app) == {"v1": 80, "v2": 20})
        assert not isinstance(app.screen, TrafficShiftScreen)
        await wait_for(pilot, lambda: audit_lines(tmp_path))
        (entry,) = audit_lines(tmp_path)
        assert entry["action"] == "shift" and entry["result"] == "ok"
        assert entry["target"] == "httproute/llm/llama-3-70b-instruct"
        assert entry["params"]["to"] == {"v1": 80, "v2": 20}
        assert entry["identity"] == "tester"
        # The demo's route object itself changed, in the splitting rule only.
        route = app.backend.writer.get_object("gateway.networking.k8s.io", "v1", "httproutes", "llm", "llama-3-70b-instruct")
        assert [r.get("weight") for r in route["spec"]["rules"][1]["backendRefs"]] == [80, 20]
        assert [r.get("weight") for r in route["spec"]["rules"][0]["backendRefs"]] == [1]


async def test_typed_digits_set_the_target_and_backspace_erases(app_factory):
    app = app_factory()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_shift(pilot, "llm/mistral-7b@stable")
        assert screen.chosen == "stable"
        await pilot.press("3", "5")
        await pilot.pause()
        assert {v.name: v.target_pct for v in screen.plan.versions} == {"stable": 35.0, "canary": 65.0}
        await pilot.press("backspace")
        await pilot.pause()
        assert screen.plan.version("stable").target_pct == 3.0
        await pilot.press("right", "minus")  # canary 97 -> 87
        await pilot.pause()
        assert {v.name: v.target_pct for v in screen.plan.versions} == {"stable": 13.0, "canary": 87.0}


async def test_preview_shows_the_exact_patch_and_escape_writes_nothing(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_shift(pilot, "llm/mistral-7b")
        await pilot.press("minus", "p")
        await wait_for(pilot, lambda: screen.mode is Mode.CONFIRM)
        text = str(screen.query_one("#shift-patch-text").render())
        assert "PATCH /apis/networking.istio.io/v1/namespaces/llm/virtualservices/mistral-7b" in text
        assert '"op": "test", "path": "/spec/http/0/route/1/weight", "value": 20' in text
        assert '"op": "replace", "path": "/spec/http/0/route/1/weight", "value": 10' in text
        await pilot.press("escape")  # back to editing
        assert screen.mode is Mode.EDIT
        await pilot.press("escape")  # closes
        await pilot.pause()
        assert not isinstance(app.screen, TrafficShiftScreen)
        assert weights(app, "llm/mistral-7b") == {"stable": 80, "canary": 20}
        assert audit_lines(tmp_path) == []


async def test_read_only_refuses(app_factory, tmp_path):
    app = app_factory(read_only=True)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        app.push_screen(TrafficShiftScreen(LLAMA))
        await pilot.pause()
        await wait_for(pilot, lambda: not isinstance(app.screen, TrafficShiftScreen))
        assert any("read-only" in str(n.message) for n in app._notifications)
        assert weights(app) == {"v1": 90, "v2": 10}
        assert audit_lines(tmp_path) == []


async def test_rbac_refusal_and_unrouted_service(app_factory):
    app = app_factory()
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        app.push_screen(TrafficShiftScreen("llm/qwen2-72b"))
        await wait_for(pilot, lambda: not isinstance(app.screen, TrafficShiftScreen))
        assert any("no traffic router" in str(n.message) for n in app._notifications)
        app.backend.permissions = {"shift": False}
        app.push_screen(TrafficShiftScreen(LLAMA))
        await wait_for(pilot, lambda: not isinstance(app.screen, TrafficShiftScreen))
        assert any("may not patch routes" in str(n.message) for n in app._notifications)


async def test_a_version_without_ready_replicas_needs_force(app_factory, tmp_path):
    app = app_factory()
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        cluster = app.backend.writer
        # Take every v2 pod of llama out of service: its replacement loads for 40 s.
        for pod in app.snapshot.pods_of(app.snapshot.service(LLAMA), "v2"):
            cluster.delete_pod(pod.namespace, pod.name)
        app.poll_now()
        await wait_for(pilot, lambda: app.snapshot.service(LLAMA).versions[1].rollout.ready == 0)
        screen = TrafficShiftScreen(LLAMA)
        app.push_screen(screen)
        await wait_for(pilot, lambda: screen.plan is not None)
        await pilot.press("plus")
        await pilot.pause()
        assert screen.plan.blockers and "no ready replicas" in screen.plan.blockers[0]
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.mode is Mode.CONFIRM)
        await pilot.press("y")  # refused: not forced
        await pilot.pause()
        assert weights(app) == {"v1": 90, "v2": 10}
        await pilot.press("f")
        await wait_for(pilot, lambda: weights(app) == {"v1": 80, "v2": 20})
        await wait_for(pilot, lambda: audit_lines(tmp_path))
        assert audit_lines(tmp_path)[0]["params"]["force"] is True


async def test_a_failed_route_read_returns_to_editing_without_a_stale_patch_box(app_factory):
    """The old dialog went back to EDIT after a failed read with its patch box still open, saying
    'reading the route…' about a read that had ended."""
    from gputui.backends.base import BackendError

    app = app_factory()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_shift(pilot)

        def unreachable(*args, **kwargs):
            raise BackendError("cannot reach the apiserver")

        app.backend.writer.get_object = unreachable
        await pilot.press("plus", "p")  # preview: read the route to build the exact patch
        await wait_for(pilot, lambda: screen.problem is not None)
        assert screen.mode is Mode.EDIT and "cannot reach the apiserver" in screen.problem
        assert not screen.patch_shown
        assert not screen.query_one("#shift-patch").has_class("shown")
