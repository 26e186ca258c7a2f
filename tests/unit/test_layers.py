"""The house rules of docs/architecture.md, checked on the source: the import graph has no cycle, Textual
stays under gputui/ui/, and the UI and the CLI never talk to Kubernetes or Prometheus directly."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "gputui"


def _imports() -> dict[str, set[str]]:
    """Module -> the gputui modules (and third-party top-level packages) it imports at run time: type-only
    imports under `if TYPE_CHECKING:` do not count, function-level ones do."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}

    class Visitor(ast.NodeVisitor):
        def __init__(self, name: str) -> None:
            self.name = name

        def visit_If(self, node: ast.If) -> None:
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    graph[self.name].add(full if full in modules else node.module)

        def visit_Import(self, node: ast.Import) -> None:
            graph[self.name].update(alias.name for alias in node.names)

    for name, path in modules.items():
        Visitor(name).visit(ast.parse(path.read_text()))
    return graph


def test_the_import_graph_has_no_cycle():
    graph = _imports()
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path[path.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_textual_only_under_ui_and_no_cluster_client_in_ui_or_cli():
    for module, imported in _imports().items():
        textual = sorted(m for m in imported if m == "textual" or m.startswith("textual."))
        if not module.startswith("gputui.ui"):
            # the TUI launcher (cli/tui.py) imports gputui.ui to start the app, never Textual itself
            assert not textual, f"{module} imports Textual: {textual}"
        if module.startswith(("gputui.ui", "gputui.cli")):
            direct = sorted(m for m in imported if m.startswith((
                "gputui.backends.kube_http", "gputui.backends.kube_errors", "gputui.backends.kubeconfig",
                "gputui.backends.exec_plugins", "gputui.backends.key_files", "gputui.backends.prom",
                "kubernetes", "prometheus_api_client")))
            assert not direct, f"{module} talks to the cluster directly: {direct}"


# docs/architecture.md's layers, top to bottom: a module imports only from its own layer or those below it.
LAYERS = ("gputui.__main__", "gputui.cli", "gputui.ui", "gputui.present", "gputui.checks", "gputui.ops",
          "gputui.backends", "gputui.settings", "gputui.policy", "gputui.snapshot", "gputui.vocabulary",
          "gputui.base", "gputui")


def _layer(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + "."))


def test_every_import_runs_down_the_layers():
    """The folder tree reads like the import graph (issue 36): an upward import, even a lazy one inside a
    function, is a layer violation. Type-only imports do not count."""
    upward = sorted(f"{module} -> {dep}" for module, deps in _imports().items() for dep in deps
                    if dep.startswith("gputui") and _layer(dep) < _layer(module))
    assert upward == []


def test_the_package_root_holds_only_rooms_and_the_two_modules_between_them():
    """gputui/'s root shows its layers: each module lives in the room of its layer; only the snapshot and
    the settings (one module each) and the entry points sit at the root."""
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "settings.py", "snapshot.py"]
    rooms = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == {layer.split(".")[1] for layer in LAYERS if layer.count(".") == 1
                     and not layer.endswith(("__main__", "settings", "snapshot"))}


def test_settings_import_no_backend():
    """The settings sit below the backends (they are read before any backend is made, and the backends take
    them): what both need, such as what a series selector looks like, lives at the vocabulary level."""
    upward = sorted(m for m in _imports()["gputui.settings"] if m.startswith("gputui.backends"))
    assert upward == [], f"gputui.settings imports {upward}"


def test_workers_reach_the_ui_only_by_message():
    """One path from a worker thread to the UI (gputui.ui.messages): no closure run on the UI thread by
    call_from_thread."""
    offenders = []
    for path in (ROOT / "ui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "call_from_thread":
                offenders.append(f"{path.name}:{node.lineno} call_from_thread")
    assert offenders == []


def test_test_modules_share_helpers_through_tests_support_only():
    """A test module importing another drags in its fixtures and tests: shared helpers live in tests/support."""
    tests = ROOT.parent / "tests"
    offenders = []
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.") \
                    and node.module.rsplit(".", 1)[-1].startswith("test_"):
                offenders.append(f"{path.relative_to(tests)} imports {node.module}")
    assert offenders == []
