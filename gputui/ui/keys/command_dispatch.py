"""What a command typed after `:` does once parsed (gputui.ui.keys.commands): the app's own (quit, help, theme,
keymap, ns, ctx, fleet) here, every other one the dashboard's (DashboardScreen.run_command); and what the
command line offers to complete from the snapshot on screen. Functions of the app (GputuiApp.run_command and
command_choices call them), which reach it through its methods only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.ui.keys.commands import ALL_NAMESPACES, Command
from gputui.ui.keys.keymaps import DEFAULT

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp


def command_choices(app: GputuiApp) -> dict[str, list[str]]:
    """Per kind of argument, what the command line completes: nodes, services, namespaces... on screen."""
    snap = app.snapshot
    namespaces = sorted({s.namespace for s in snap.services} | {p.namespace for p in snap.pods}) if snap else []
    return {
        "node": [n.name for n in snap.nodes] if snap else [],
        "service": [s.key for s in snap.services] if snap else [],
        "namespace": ["all", *namespaces],
        "theme": sorted(app.available_themes),
        "keymap": sorted({DEFAULT, *app.loaded_keymaps()}),
        "context": app.contexts(),
    }


def run_command(app: GputuiApp, command: Command | None) -> None:
    """Do what the command says (None: the command line was left without one)."""
    if command is None:
        return
    name, arg = command.name, command.arg
    if name == "quit":
        app.call_later(app.action_quit)
    elif name == "help":
        app.action_help()
    elif name == "theme":
        if arg is None:
            app.action_themes()
        else:
            app.theme = arg
    elif name == "keymap":
        if arg is not None and app.use_keymap(arg):  # parse() gives keymap its argument
            app.notify(f"keymap {arg}: see ? for the keys in force")
    elif name == "ns":
        app.show_namespace(None if arg == ALL_NAMESPACES else arg)
    elif name == "ctx":
        if arg is not None:  # parse() gives ctx its argument
            app.switch_context(arg)
    elif name == "fleet":
        app.open_fleet()
    elif name == "disruptions":  # read-only, from any screen (the dashboard's run_command is not needed)
        from gputui.ui.screens.disruptions import DisruptionsScreen  # noqa: PLC0415 (screen: loaded when first shown)

        app.push_screen(DisruptionsScreen())
    else:
        dashboard = app.front_dashboard()
        if dashboard is None:
            app.notify(f":{name} is not available on the wallboard", severity="warning")
            return
        dashboard.run_command(name, arg)
