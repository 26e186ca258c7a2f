"""Command mode in the app: completion, the commands themselves, and clear errors."""

from __future__ import annotations

from textual.widgets import Input, Static

from gputui.ui.screens.command import CommandScreen
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.diagnostics import DiagnosticsScreen
from gputui.ui.screens.drain_plan import DrainPlanScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.screens.theme_picker import ThemePickerScreen
from gputui.ui.screens.traffic_shift import TrafficShiftScreen
from tests.ui.pilot import command, loaded, wait_for

# The demo's fleet, by hand (tests/demo_figures.py): cards, MIG slices, shared replicas, DRA devices in use/offered,
# and free.
FLEET_USED, FLEET_FREE = "82/166+5/36MIG+6/16shared+6/8DRA", "84+31MIG+10shared+2DRA"


async def test_tab_completes_and_enter_runs(app_factory):
    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await command(pilot, "dr", "tab")
        box = app.screen.query_one(Input)
        assert box.value == "drain "
        await pilot.press(*"h100-07", "enter")  # one node contains it: taken as meant
        await wait_for(pilot, lambda: isinstance(app.screen, DrainPlanScreen))
        assert app.screen.nodes == ["gpu-h100-07"]


async def test_a_bad_command_says_why_and_stays_open(app_factory):
    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await command(pilot, "drain gpu-nope-1", "enter")
        assert isinstance(app.screen, CommandScreen)
        assert "no node 'gpu-nope-1'" in str(app.screen.query_one("#command-menu", Static).render())
        await pilot.press("escape")
        assert not isinstance(app.screen, CommandScreen)


async def test_commands_reach_their_screens(app_factory):
    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await command(pilot, "diag", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DiagnosticsScreen))
        await command(pilot, "nodes", "enter")  # from any screen back to the nodes
        await wait_for(pilot, lambda: app.screen.query("#nodes") and app.screen.focused.id == "nodes")
        await command(pilot, "shift llm/mistral-7b", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TrafficShiftScreen))
        assert app.screen.service_key == "llm/mistral-7b"
        await pilot.press("escape")
        await command(pilot, "theme gputui-light", "enter")
        assert app.theme == "gputui-light"
        await command(pilot, "theme", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ThemePickerScreen))
        await pilot.press("down")
        assert app.theme != "gputui-light"  # previewing
        await pilot.press("escape")
        assert app.theme == "gputui-light"  # escape puts it back
        await command(pilot, "keymap vim", "enter")
        assert app.keymap_name == "vim"


async def test_namespace_view_limits_the_services_listed(app_factory):
    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        every = app.screen.services_table.row_count
        namespaces = {s.namespace for s in app.snapshot.services}
        assert len(namespaces) > 1
        other = sorted(namespaces)[0]
        await command(pilot, f"ns {other}", "enter")
        await pilot.pause()
        shown = app.screen.services_table.row_count
        assert 0 < shown < every
        await command(pilot, "ns all", "enter")
        await pilot.pause()
        assert app.screen.services_table.row_count == every


async def test_read_only_refuses_write_commands(app_factory):
    app = app_factory(read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        for line in ("cordon gpu-h100-01", "drain gpu-h100-01"):
            await command(pilot, line, "enter")
            await pilot.pause()
            assert not isinstance(app.screen, (ConfirmScreen, DrainPlanScreen))
        assert sum("read-only:" in n.message and "is unavailable" in n.message for n in app._notifications) == 2
        await command(pilot, "shift llm/mistral-7b", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, TrafficShiftScreen)


async def test_ctx_on_the_demo_says_there_is_one(app_factory):
    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await command(pilot, "ctx demo", "enter")
        assert any("already on demo" in n.message for n in app._notifications)
        assert not isinstance(app.screen, NodeDetailScreen)


async def test_check_screen_lists_failures_first_and_enter_shows_the_objects_and_fix(app_factory):
    from gputui.ui.screens.check import CheckScreen
    from gputui.ui.screens.detail import DetailScreen
    from gputui.ui.widgets.item_list import ItemList

    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await command(pilot, "check", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, CheckScreen))
        items = app.screen.query_one(ItemList)
        await wait_for(pilot, lambda: items.selected is not None)
        statuses = [i.payload.status.value for i in items.items]
        assert statuses[0] == "fail" and statuses[-1] == "pass"  # the worst on top
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        body = str(app.screen._body)
        assert "fix:" in body and items.selected.objects[0] in body


async def test_pools_and_versions_screens_show_the_demos_pools_drift_and_failed_upgrade(app_factory):
    from gputui.ui.screens.node_pools import NodePoolsScreen
    from gputui.ui.screens.versions import VersionsScreen
    from gputui.ui.widgets.key_table import KeyTable

    app = app_factory()
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(pilot)
        await command(pilot, "pools", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodePoolsScreen) and app.idle_watch.idle is not None)
        table = app.screen.query_one("#pools", KeyTable)
        rows = {str(table.get_row(k)[0]): [str(c) for c in table.get_row(k)] for k in table.rows}
        assert set(rows) == {"hopper", "ampere", "ada-lovelace", "(fleet)"}
        # Each scheme apart, as the header counts them (units of all schemes are no GPUs): the demo's numbers
        # worked out by hand (tests/demo_figures.py), not gputui's sums.
        assert rows["(fleet)"][2:4] == [FLEET_USED, FLEET_FREE]
        await pilot.press("escape")
        await command(pilot, "versions", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, VersionsScreen))
        table = app.screen.query_one("#versions", KeyTable)
        a100_05, a100_08 = ([str(c) for c in table.get_row(n)] for n in ("gpu-a100-05", "gpu-a100-08"))
        assert a100_05[2] == "≠535.183.01"  # drift within its pool
        # In that state since before gputui looked: "≥" and how long it has watched; why it is stuck, below the
        # table for the selected row, in full (issue 35: a column cut even at 200).
        assert a100_08[-1].startswith("upgrade-failed ≥") and a100_08[-1].endswith("⚠")
        table.move_cursor(row=table.get_row_index("gpu-a100-08"))
        await pilot.pause()
        assert "upgrade-failed stuck because upgrade failed: the operator leaves" in str(
            app.screen.query_one("#versions-why").render())


async def test_pools_at_80_columns_keep_util_and_idle_on_screen_and_a_wider_screen_shows_each_scheme(app_factory):
    """Each scheme's figures (83/167+5/36MIG+...) pushed Util and Idle off an 80-column screen: below 100 columns
    the table shows whole cards and a "+", as the header does, and says what "+" means; widened, it shows each
    scheme, in columns made as wide as that (not cut to the narrow ones)."""
    from gputui.ui.screens.node_pools import NodePoolsScreen
    from gputui.ui.widgets.key_table import KeyTable

    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await command(pilot, "pools", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodePoolsScreen))
        table = app.screen.query_one("#pools", KeyTable)

        def fleet_row() -> list[str]:
            return [str(c) for c in table.get_row("(fleet)")]

        assert fleet_row()[2:4] == ["82/166+", "84+"]  # whole cards, and "+": more than cards (tests/demo_figures.py)
        assert table.virtual_size.width <= 80  # Util and Idle on screen, nothing to scroll to
        assert "+: MIG slices" in str(app.screen.query_one("#pools-note", Static).render())
        await pilot.resize_terminal(160, 40)
        await wait_for(pilot, lambda: fleet_row()[2] == FLEET_USED)
        widths = {c.label.plain: c.get_render_width(table) for c in table.columns.values()}
        assert widths["Allocated"] >= len(FLEET_USED) and widths["Free"] >= len(FLEET_FREE)
        assert "+: MIG slices" not in str(app.screen.query_one("#pools-note", Static).render())
