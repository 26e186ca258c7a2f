"""Which classes' bindings are live together on each screen: read by scripts/default-keymap.py to write
keymaps/default.yaml and gputui/ui/keymap_table.py, and by the test that checks they agree with the code.
Importing it imports every screen; nothing at run time does (keymaps read the generated table)."""

from __future__ import annotations

from textual.binding import Binding


def binding_scopes() -> dict[str, tuple[type, ...]]:
    """Per screen: the classes whose bindings are live together on it (app, screen, focusable widgets)."""
    from textual.widgets import Input

    from gputui.ui.app import GputuiApp
    from gputui.ui.audit_screen import AuditScreen
    from gputui.ui.canary_dialog import CanaryConfirm
    from gputui.ui.check_screen import CheckScreen
    from gputui.ui.command_screen import CommandScreen
    from gputui.ui.confirm import ConfirmScreen
    from gputui.ui.dashboard import DashboardScreen
    from gputui.ui.detail_screen import DetailScreen
    from gputui.ui.diagnostics_screen import DiagnosticsScreen
    from gputui.ui.drain_board import DrainProgressScreen
    from gputui.ui.drain_plan_screen import DrainPlanScreen
    from gputui.ui.help import HelpScreen
    from gputui.ui.item_list import ItemList
    from gputui.ui.key_table import KeyTable
    from gputui.ui.node_detail import NodeDetailScreen
    from gputui.ui.pools_screen import PoolsScreen
    from gputui.ui.service_screen import ServiceScreen
    from gputui.ui.theme_picker import ThemePickerScreen
    from gputui.ui.traffic_screen import TrafficShiftScreen
    from gputui.ui.versions_screen import VersionsScreen
    from gputui.ui.virtual_table import VirtualTable
    from gputui.ui.wallboard import WallboardScreen

    app = (GputuiApp,)
    return {
        "dashboard": app + (DashboardScreen, VirtualTable, KeyTable),
        "node": app + (NodeDetailScreen, VirtualTable),
        "service": app + (ServiceScreen,),
        "help": app + (HelpScreen,),
        "confirm": app + (ConfirmScreen, CanaryConfirm),
        "diagnostics": app + (DiagnosticsScreen, ItemList),
        "audit": app + (AuditScreen, ItemList),
        "check": app + (CheckScreen, ItemList),
        "versions": app + (VersionsScreen, KeyTable),
        "pools": app + (PoolsScreen, KeyTable),
        "detail": app + (DetailScreen,),
        "drain-plan": app + (DrainPlanScreen, Input),
        "drain-progress": app + (DrainProgressScreen, KeyTable),
        "shift": app + (TrafficShiftScreen,),
        "themes": app + (ThemePickerScreen,),
        "wallboard": app + (WallboardScreen,),
        "command": app + (CommandScreen, Input),
    }


def _bindings(cls: type) -> list[Binding]:
    merged = getattr(cls, "_merged_bindings", None)  # Textual's own merge of the class's BINDINGS with its bases'
    return [b for bindings in merged.key_to_bindings.values() for b in bindings] if merged else []


def _keys(classes: tuple[type, ...]) -> dict[str, str]:
    """Binding id (or "(action)" for a binding without one) -> its keys, in the code's order."""
    out: dict[str, list[str]] = {}
    for cls in classes:
        for b in _bindings(cls):
            name = b.id or f"({b.action})"
            if b.key not in out.setdefault(name, []):
                out[name].append(b.key)
    return {name: ",".join(keys) for name, keys in out.items()}


def app_table() -> dict[str, str]:
    """The app's own bindings: live on every screen (each scope lists the app first)."""
    return _keys(next(iter(binding_scopes().values()))[:1])


def scope_table() -> dict[str, dict[str, str]]:
    """Per screen, the bindings of its own classes (the app's are in app_table)."""
    return {scope: _keys(classes[1:]) for scope, classes in binding_scopes().items()}
