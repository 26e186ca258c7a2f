"""Which classes' bindings are live together on each screen: read by scripts/default-keymap.py to write
keymaps/default.yaml and gputui/ui/keys/keymap_table.py, and by the test that checks they agree with the code.
Importing it imports every screen; nothing at run time does (keymaps read the generated table)."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from gputui.ui.app import GputuiApp
from gputui.ui.screens.audit import AuditScreen
from gputui.ui.screens.canary_confirm import CanaryConfirm
from gputui.ui.screens.check import CheckScreen
from gputui.ui.screens.command import CommandScreen
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.dashboard import DashboardScreen
from gputui.ui.screens.detail import DetailScreen
from gputui.ui.screens.diagnostics import DiagnosticsScreen
from gputui.ui.screens.disruptions import DisruptionsScreen
from gputui.ui.screens.drain_plan import DrainPlanScreen
from gputui.ui.screens.drain_progress import DrainProgressScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.node_detail import NodeDetailScreen
from gputui.ui.screens.node_pools import NodePoolsScreen
from gputui.ui.screens.service import ServiceScreen
from gputui.ui.screens.theme_picker import ThemePickerScreen
from gputui.ui.screens.traffic_shift import TrafficShiftScreen
from gputui.ui.screens.versions import VersionsScreen
from gputui.ui.screens.wallboard import WallboardScreen
from gputui.ui.widgets.item_list import ItemList
from gputui.ui.widgets.key_table import KeyTable
from gputui.ui.widgets.virtual_table import VirtualTable


def binding_scopes() -> dict[str, tuple[type, ...]]:
    """Per screen: the classes whose bindings are live together on it (app, screen, focusable widgets)."""
    app = (GputuiApp,)
    return {
        "dashboard": (*app, DashboardScreen, VirtualTable, KeyTable),
        "node": (*app, NodeDetailScreen, VirtualTable),
        "service": (*app, ServiceScreen),
        "help": (*app, HelpScreen),
        "confirm": (*app, ConfirmScreen, CanaryConfirm),
        "diagnostics": (*app, DiagnosticsScreen, ItemList),
        "audit": (*app, AuditScreen, ItemList),
        "check": (*app, CheckScreen, ItemList),
        "versions": (*app, VersionsScreen, KeyTable),
        "pools": (*app, NodePoolsScreen, KeyTable),
        "disruptions": (*app, DisruptionsScreen, KeyTable),
        "detail": (*app, DetailScreen),
        "drain-plan": (*app, DrainPlanScreen, Input),
        "drain-progress": (*app, DrainProgressScreen, KeyTable),
        "shift": (*app, TrafficShiftScreen),
        "themes": (*app, ThemePickerScreen),
        "wallboard": (*app, WallboardScreen),
        "command": (*app, CommandScreen, Input),
    }


def class_bindings(cls: type) -> list[Binding]:
    merged = getattr(cls, "_merged_bindings", None)  # Textual's own merge of the class's BINDINGS with its bases'
    return [b for bindings in merged.key_to_bindings.values() for b in bindings] if merged else []


def _keys(classes: tuple[type, ...]) -> dict[str, str]:
    """Binding id (or "(action)" for a binding without one) -> its keys, in the code's order."""
    out: dict[str, list[str]] = {}
    for cls in classes:
        for b in class_bindings(cls):
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
