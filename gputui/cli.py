"""The `gputui` command: the TUI by default, headless subcommands for scripts and runbooks.

Every user error is one line on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, NoReturn, Sequence

from gputui import __version__
from gputui.backends.base import Backend, BackendError
from gputui.settings import Settings, SettingsError, load_settings

EXIT_USAGE = 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    """Options valid before or after a subcommand. SUPPRESS: an unset flag never overrides."""
    s = argparse.SUPPRESS
    g = parser.add_argument_group("cluster")
    g.add_argument("--demo", action="store_true", default=s, help="run on the embedded simulated cluster")
    g.add_argument("--seed", type=int, default=s, help="seed of the demo cluster (default 7)")
    g.add_argument("--kubeconfig", default=s, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    g.add_argument("--context", default=s, help="kubeconfig context to use")
    g.add_argument("-n", "--namespace", default=s, help="limit workloads to this namespace")
    g.add_argument("--prometheus", default=s, metavar="URL", help="Prometheus URL for DCGM and session metrics")
    g.add_argument("--dcgm-interval", type=float, default=argparse.SUPPRESS, metavar="SECONDS",
                   help="seconds between fleet-wide DCGM reads; sessions are read every refresh (default 15, 0: every refresh)")
    g.add_argument("--read-only", action="store_true", default=s, help="never write to the cluster")
    g.add_argument("--config", default=s, metavar="FILE", help="config file (default: $XDG_CONFIG_HOME/gputui/config.yaml)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gputui", description="GPU nodes and inference services of a Kubernetes cluster, live.")
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    _common(parser)
    ui = parser.add_argument_group("screen")
    ui.add_argument("--refresh", type=_positive_float, default=argparse.SUPPRESS, metavar="SECONDS", help="seconds between refreshes (default 2)")
    ui.add_argument("--theme", default=argparse.SUPPRESS, help="theme name (see :theme in the app)")
    ui.add_argument("--keymap", default=argparse.SUPPRESS, help="keymap: default, vim, k9s or one of yours")
    ui.add_argument("--wallboard", action="store_true", default=argparse.SUPPRESS, help="read-only wallboard with rotating pages")
    ui.add_argument("--rotate", dest="wallboard_rotate", type=_positive_float, default=argparse.SUPPRESS, metavar="SECONDS", help="seconds per wallboard page (default 15)")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    nodes = sub.add_parser("nodes", help="print the GPU nodes (table or JSON) and exit")
    _common(nodes)
    nodes.add_argument("-o", "--output", choices=("table", "json"), default="table")
    from gputui import headless_drain

    headless_drain.add_parser(sub, _common)
    from gputui import headless_shift

    headless_shift.add_parser(sub, _common)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    from pathlib import Path

    flags = {
        k: v for k, v in vars(args).items()
        if k in ("demo", "seed", "kubeconfig", "context", "namespace", "prometheus", "read_only", "refresh", "theme",
                 "keymap", "wallboard", "wallboard_rotate", "dcgm_interval")
    }
    config = getattr(args, "config", None)
    if config and not Path(config).exists():
        raise SettingsError(f"config file {config} does not exist")
    return load_settings(flags, config_path=Path(config) if config else None)


def _fail(message: str) -> int:
    print(f"gputui: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        settings = _settings(args)
        if args.command is not None:
            _require_cluster(settings)
        if args.command == "nodes":
            return _nodes(settings, args.output)
        if args.command == "shift":
            from gputui import headless_shift

            return headless_shift.run(settings, args, _backend)
        if args.command == "drain":
            from gputui import headless_drain

            return headless_drain.run(settings, args, _backend)
        return _tui(settings)
    except UsageError as exc:
        return _fail(str(exc))
    except (SettingsError, BackendError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gputui nodes | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _require_cluster(settings: Settings) -> None:
    """A headless command acts on the cluster it was pointed at, never on a simulation by surprise: with
    no kubeconfig it stops with one line (the TUI, where the header says SIMULATED, falls back instead)."""
    from gputui.backends.factory import have_cluster_config, kubeconfig_paths

    if not settings.demo and not have_cluster_config(settings):
        looked = ", ".join(str(p) for p in kubeconfig_paths(settings))
        raise UsageError(f"no kubeconfig found (looked for {looked}); give --kubeconfig or --context, "
                         f"or --demo for the simulated demo cluster")


def _backend(settings: Settings, per_gpu: bool = False) -> Backend:
    from gputui.backends.factory import build_backend

    return build_backend(settings, per_gpu=per_gpu)


def _check_named(kind: str, name: str, names: set[str], problems: list) -> None:
    """A theme or keymap asked for by name exists and loads; else one line saying which file is bad."""
    if name in names:
        return
    bad = next((p for p in problems if os.path.splitext(os.path.basename(p.path))[0] == name), None)
    if bad is not None:
        raise SettingsError(f"{kind} {name!r} cannot be used: {bad}")
    raise SettingsError(f"unknown {kind} {name!r}; available: {', '.join(sorted(names))}")


def _tui(settings: Settings) -> int:
    from dataclasses import replace

    from gputui.backends.factory import have_cluster_config
    from gputui.ops.audit import audit_for
    from gputui.ui.keymaps import DEFAULT, load_keymaps
    from gputui.ui.theming import BUILTIN_THEMES, load_themes

    no_color = bool(os.environ.get("NO_COLOR"))
    if no_color and settings.theme == Settings().theme:
        settings = replace(settings, theme="gputui-mono")  # NO_COLOR: no theme asked for, so none in colour
    themes, theme_problems = load_themes()
    _check_named("theme", settings.theme, {*themes, *BUILTIN_THEMES}, theme_problems)
    keymaps, keymap_problems = load_keymaps()
    _check_named("keymap", settings.keymap, {*keymaps, DEFAULT}, keymap_problems)
    fallback = not settings.demo and not have_cluster_config(settings)
    backend = _backend(settings, per_gpu=settings.wallboard)  # the heat map draws every GPU
    from gputui.ui.app import GputuiApp

    audit = audit_for(settings.audit_log, backend)
    notice = "No kubeconfig found: showing the embedded demo cluster (a simulation)." if fallback else None
    app = GputuiApp(
        settings, backend, audit=audit, no_color=no_color, notice=notice
    )
    try:
        app.run()
    finally:
        backend.close()
    return 0


def node_record(snapshot, node) -> dict[str, Any]:
    from gputui.model import node_alerts

    return {
        "name": node.name,
        "simulated": snapshot.simulated,  # true: the demo cluster, nothing here is real
        "state": node.state.value,
        "gpu_model": node.gpu_product,
        "gpus_allocated": snapshot.gpus_allocated(node.name),
        "gpus_total": node.gpu_allocatable,
        "gpus_capacity": node.gpu_capacity,
        "driver_version": node.driver_version,
        "alerts": [f"{a.kind}: {a.message}" for a in node_alerts(node)],
        "gpus": [
            {
                "index": g.index,
                "uuid": g.uuid,
                "util_pct": g.util_pct,
                "mem_used_mib": g.mem_used_mib,
                "mem_total_mib": g.mem_total_mib,
                "temp_c": g.temp_c,
                "power_w": g.power_w,
            }
            for g in node.gpus
        ],
    }


def _nodes(settings: Settings, output: str) -> int:
    backend = _backend(settings, per_gpu=True)  # the JSON lists every GPU
    try:
        snapshot = backend.reader.snapshot()
    finally:
        backend.close()
    if output == "json":
        json.dump([node_record(snapshot, n) for n in snapshot.nodes], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from gputui import render
    from gputui.model import has_driver_drift, node_alerts

    majority = snapshot.majority_driver
    table = Table(box=None, pad_edge=False)
    for label in ("NODE", "STATE", "MODEL", "GPUS", "UTIL", "MEMORY", "TEMP", "POWER", "DRIVER", "ALERTS"):
        table.add_column(label, no_wrap=True)
    for n in snapshot.nodes:
        table.add_row(
            Text(n.name), n.state.value, Text(render.short_model(n.gpu_product)),
            f"{snapshot.gpus_allocated(n.name)}/{n.gpu_allocatable}", render.pct(n.mean_util).strip(),
            render.mem_used_total(n.mem_used_mib, n.mem_total_mib), render.temp(n.max_temp),
            render.power(n.power_w),
            Text(("≠" if has_driver_drift(n, majority) else "") + (n.driver_version or "–")),
            Text(", ".join(dict.fromkeys(a.kind for a in node_alerts(n, settings.temp_threshold)))),
        )
    console = Console(no_color=bool(os.environ.get("NO_COLOR")), width=200 if not sys.stdout.isatty() else None)
    if snapshot.simulated:
        console.print(Text("# SIMULATED: the demo cluster, nothing here is real", style="dim"))
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
