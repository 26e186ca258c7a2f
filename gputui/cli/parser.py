"""The command line: options valid before or after a subcommand, and each subcommand's own."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import gputui
from gputui.cli.arguments import (
    add_check_parser,
    add_cordon_parsers,
    add_disruptions_parser,
    add_drain_parser,
    add_evidence_parser,
    add_rollout_parser,
    add_scale_down_parser,
    add_shift_parser,
    contexts,
    duration,
    file_path,
    idle_below,
    namespace,
    positive_seconds,
    prometheus_url,
    seconds_or_zero,
    whole,
)
from gputui.cli.common import UsageError
from gputui.settings import Settings, SettingsError, load_settings


class _Version(argparse.Action):
    """--version, reading the installed metadata only when asked (not on every start)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=str(kwargs.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        print(f"gputui {gputui.__version__}")  # on stdout, as argparse's own version action
        parser.exit()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # argparse strips a '--' from an option's arguments: `--idle-window=--` then gives [] without calling the
        # type at all, and a list reached the code as a duration (a crash, found by scripts/fuzz-cli.py).
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
        return super()._get_values(action, arg_strings)


_positive_float = positive_seconds  # seconds above 0, finite, at most an hour (gputui.base.validate)
# Commands that take a fleet (`--context a,b`, or `contexts:` in the config): the TUI's fleet view and wallboard,
# `nodes`, and `serve` (each page runs the TUI). Every other command acts on one cluster.
FLEET_COMMANDS = (None, "nodes", "serve")


def common(parser: argparse.ArgumentParser) -> None:
    """Options valid before or after a subcommand. SUPPRESS: an unset flag never overrides."""
    s = argparse.SUPPRESS
    g = parser.add_argument_group("cluster")
    g.add_argument("--demo", action="store_true", default=s, help="run on the embedded simulated cluster")
    g.add_argument("--seed", type=whole, default=s, help="seed of the demo cluster (default 7)")
    g.add_argument("--kubeconfig", type=file_path, default=s, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    g.add_argument("--context", type=contexts, default=s,
                   help="kubeconfig context to use (a,b: a fleet, for the TUI, the wallboard and nodes)")
    g.add_argument("--exec-timeout", type=_positive_float, default=s, metavar="SECONDS",
                   help="seconds the kubeconfig's exec credential plugin may take before it is stopped (default 30)")
    g.add_argument("-n", "--namespace", type=namespace, default=s, help="limit workloads to this namespace")
    g.add_argument("--prometheus", type=prometheus_url, default=s, metavar="URL", help="Prometheus URL for DCGM and session metrics")
    g.add_argument("--dcgm-interval", type=seconds_or_zero, default=argparse.SUPPRESS, metavar="SECONDS",
                   help="seconds between fleet-wide DCGM reads; sessions are read every refresh (default 15, 0: every refresh)")
    g.add_argument("--read-only", action="store_true", default=s, help="never write to the cluster")
    g.add_argument("--config", type=file_path, default=s, metavar="FILE", help="config file (default: $XDG_CONFIG_HOME/gputui/config.yaml)")
    g.add_argument("--debug", action="store_true", default=s,
                   help="log the metrics mode, each read's queries and time, and watch relists (to stderr; from the "
                        "terminal UI to $XDG_STATE_HOME/gputui/debug.log)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gputui", description="GPU nodes and inference services of a Kubernetes cluster, live.")
    parser.add_argument("--version", action=_Version, help="show gputui's version and exit")
    common(parser)
    ui = parser.add_argument_group("screen")
    ui.add_argument("--refresh", type=_positive_float, default=argparse.SUPPRESS, metavar="SECONDS", help="seconds between refreshes (default 2)")
    ui.add_argument("--theme", default=argparse.SUPPRESS, help="theme name (see :theme in the app)")
    ui.add_argument("--keymap", default=argparse.SUPPRESS, help="keymap: default, vim, k9s or one of yours")
    ui.add_argument("--wallboard", action="store_true", default=argparse.SUPPRESS, help="read-only wallboard with rotating pages")
    ui.add_argument("--rotate", dest="wallboard_rotate", type=_positive_float, default=argparse.SUPPRESS, metavar="SECONDS", help="seconds per wallboard page (default 15)")
    ui.add_argument("--no-cache", dest="cache", action="store_false", default=argparse.SUPPRESS,
                    help="do not draw the last snapshot seen of the context while the live read runs, nor keep one")
    # Set by `gputui serve` on each page's gputui: :ctx and :fleet cannot leave the context(s) it started on.
    ui.add_argument("--pin-context", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    nodes = sub.add_parser("nodes", help="print the GPU nodes (table or JSON) and exit")
    common(nodes)
    nodes.add_argument("-o", "--output", choices=("table", "json"), default="table")
    nodes.add_argument("--window", type=duration, default=24 * 3600.0, metavar="DURATION",
                       help="the window GPU faults are counted over, against each node's pool (-o json: "
                            "fault_peers; default 24h)")
    versions = sub.add_parser("versions", help="print each GPU node's driver, CUDA, kubelet, runtime, kernel, OS, GPU "
                              "Operator components and engines, drift within its pool flagged, and exit")
    common(versions)
    versions.add_argument("-o", "--output", choices=("table", "json"), default="table")
    pools = sub.add_parser("pools", help="print GPU use per node pool (allocated, unallocated, idle) and exit")
    common(pools)
    pools.add_argument("-o", "--output", choices=("table", "json"), default="table")
    pools.add_argument("--idle-window", type=duration, default=3600.0, metavar="DURATION",
                       help="the window an allocated GPU must stay idle over (default 1h)")
    pools.add_argument("--idle-below", type=idle_below, default=5.0, metavar="PCT",
                       help="mean utilisation below which it counts as idle (default 5)")
    services = sub.add_parser("services", help="print the inference services, versions, weights and sessions, and exit")
    common(services)
    services.add_argument("-o", "--output", choices=("table", "json"), default="table")
    serve = sub.add_parser("serve", help="serve gputui (or the wallboard) to a browser; read-only unless --allow-writes")
    common(serve)
    serve.add_argument("--wallboard", action="store_true", help="the wallboard, started by itself in the page")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; off "
                       "loopback, HTTPS with --tls-cert/--tls-key, or --insecure-http)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve.add_argument("--allow-writes", action="store_true", help="let the page cordon, drain and shift")
    serve.add_argument("--tls-cert", metavar="FILE", help="PEM certificate (chain): serve HTTPS")
    serve.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    serve.add_argument("--insecure-http", action="store_true", help="off loopback without TLS anyway (the token "
                       "and the session cookie cross the network in clear)")
    serve.add_argument("--no-token", action="store_true", help="loopback only: no token asked (every user and "
                       "program of this machine can open the page)")
    serve.add_argument("--public-host", action="append", default=[], metavar="NAME",
                       help="a name browsers reach serve by (as in its URL), accepted in Host and Origin besides "
                       "--host and the address a connection arrives on; repeatable")
    serve.add_argument("--max-pages", type=int, default=4, metavar="N",
                       help="pages open at once, each running its own gputui (default 4)")
    # its first name, kept so scripts that use it still run; "session" in gputui means an inference session
    serve.add_argument("--max-sessions", type=int, dest="max_pages", help=argparse.SUPPRESS)
    serve.add_argument("--refresh", type=_positive_float, default=argparse.SUPPRESS, metavar="SECONDS")
    serve.add_argument("--theme", default=argparse.SUPPRESS)
    serve.add_argument("--keymap", default=argparse.SUPPRESS)
    serve.add_argument("--rotate", dest="wallboard_rotate", type=_positive_float, default=argparse.SUPPRESS,
                       metavar="SECONDS")
    rules = sub.add_parser("rules", help="print Prometheus recording rules for the fleet view (gputui reads their "
                           "series when they exist) and exit")
    rules.add_argument("--host-label", default="Hostname", help="the label naming a node on DCGM series "
                       "(dcgm-exporter: Hostname, or hostname in newer builds)")
    rules.add_argument("--interval", default="30s", help="evaluation interval (default 30s, DCGM's usual cadence)")
    add_drain_parser(sub, common)
    add_shift_parser(sub, common)
    add_check_parser(sub, common)
    add_scale_down_parser(sub, common)
    add_rollout_parser(sub, common)
    add_cordon_parsers(sub, common)
    add_disruptions_parser(sub, common)
    add_evidence_parser(sub, common)
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    flags = {
        k: v for k, v in vars(args).items()
        if k in ("demo", "seed", "kubeconfig", "context", "namespace", "prometheus", "read_only", "refresh", "theme",
                 "keymap", "wallboard", "wallboard_rotate", "dcgm_interval", "pin_context", "exec_timeout", "cache")
    }
    config: str | None = getattr(args, "config", None)
    try:
        missing = bool(config) and not Path(str(config)).exists()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL in it
        raise SettingsError(f"--config: cannot use {str(config)[:80]!r}: {getattr(exc, 'strerror', None) or exc}") from None
    if missing:
        raise SettingsError(f"config file {config} does not exist")
    return one_cluster(load_settings(flags, config_path=Path(config) if config else None), args)


def one_cluster(settings: Settings, args: argparse.Namespace) -> Settings:
    """A command that acts on one cluster never takes the first of a fleet silently: `gputui drain --context a,b`
    is refused, as is a fleet from the config's `contexts:` unless --context names the one cluster."""
    command = getattr(args, "command", None)
    if len(settings.contexts) <= 1 or command in FLEET_COMMANDS:
        return settings
    given = getattr(args, "context", None)
    if given and "," in given:
        raise UsageError(f"--context {given}: gputui {command} acts on one cluster; name one context "
                         "(a fleet is for the TUI, the wallboard and gputui nodes)")
    if given:
        return replace(settings, contexts=())
    raise UsageError(f"contexts {', '.join(settings.contexts)} (a fleet, from the config) and gputui {command} acts "
                     "on one cluster: name it with --context")
