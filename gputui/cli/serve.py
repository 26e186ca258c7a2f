"""`gputui serve`: gputui in a browser, through textual-serve (each page runs its own gputui process, fed over a
websocket). Read-only unless --allow-writes: the child gets --read-only, so no writer exists in it at all, and
--pin-context, so it cannot leave the cluster it was started on. A token is needed on every address (printed
once at start, never logged; --no-token only on loopback); a login makes a signed, expiring login cookie.
Off loopback, HTTPS (--tls-cert/--tls-key) or an explicit --insecure-http. What guards each request is
gputui.cli.serve_guard; the aiohttp app, gputui.cli.serve_app. The wallboard starts by itself in the page: a
wall screen has nobody to click."""

from __future__ import annotations

import argparse
import errno
import secrets
import shlex
import socket
import ssl
import sys

from gputui.cli.common import EXIT_USAGE, fail
from gputui.cli.serve_app import Options, build_server
from gputui.cli.serve_guard import is_host_name, is_loopback, served
from gputui.settings import Settings

# Flags of the parent's command line the page's gputui gets too (the config file and GPUTUI_* reach it anyway).
PASSED = {"demo": "--demo", "seed": "--seed", "kubeconfig": "--kubeconfig", "context": "--context",
          "namespace": "--namespace", "prometheus": "--prometheus", "dcgm_interval": "--dcgm-interval",
          "config": "--config", "refresh": "--refresh", "theme": "--theme", "keymap": "--keymap",
          "wallboard_rotate": "--rotate", "debug": "--debug"}  # each page's gputui appends to the debug file


def child_command(args: argparse.Namespace) -> str:
    """The gputui each page runs: the flags given here, read-only unless writes were allowed."""
    argv = [sys.executable, "-m", "gputui"]
    given = vars(args)
    for dest, flag in PASSED.items():
        value = given.get(dest)
        if value is True:
            argv.append(flag)
        elif value not in (None, False):
            argv += [flag, str(value)]
    if not args.allow_writes:
        argv.append("--read-only")
    if args.wallboard:
        argv.append("--wallboard")
    argv.append("--pin-context")  # a browser user stays on the operator's chosen cluster: no :ctx, no :fleet
    return shlex.join(argv)


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with serve's flags, in one line (None: nothing). Before anything listens or prints."""
    loopback = is_loopback(args.host)
    if not 0 < args.port < 65536:
        return f"--port must be between 1 and 65535, got {args.port}"
    if args.wallboard and args.allow_writes:
        return "--wallboard is read-only: drop --allow-writes"
    if args.max_pages < 1:
        return f"--max-pages must be 1 or more, got {args.max_pages}"
    if args.no_token and not loopback:
        return f"--no-token is allowed on loopback only (127.0.0.1, ::1, localhost), not on {args.host}"
    if bool(args.tls_cert) != bool(args.tls_key):
        return "--tls-cert and --tls-key go together: give both"
    for name in args.public_host:  # as a browser's URL names it, without the port (serve's own)
        if not is_host_name(name):
            return f"--public-host {name!r}: give a host name or an address, without a port"
    if not loopback and not args.tls_cert and not args.insecure_http:
        return (f"{args.host} is not loopback: the token and the login would cross the network in clear; "
                "give --tls-cert and --tls-key, or --insecure-http to accept that")
    return None


class _Encrypted(Exception):
    """The key asks for a pass phrase: serve runs unattended, so it asks none (OpenSSL would prompt)."""


def _no_pass_phrase() -> bytes:
    raise _Encrypted


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """The server's TLS context, or a ValueError saying in one line why the files will not do."""
    for path in (cert, key):  # OpenSSL's own error names no file
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise ValueError(f"{path}: {exc.strerror or exc}") from None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=_no_pass_phrase)
    except _Encrypted:
        raise ValueError(f"{key} is encrypted: give the key without a pass phrase") from None
    except ssl.SSLError as exc:  # before OSError: it is one
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ValueError(f"{key} is not the private key of {cert}") from None
        raise ValueError(f"{cert} must be a PEM certificate (chain) and {key} its PEM private key") from None
    except OSError as exc:  # gone or unreadable since
        raise ValueError(f"{cert}, {key}: {exc.strerror or exc}") from None
    return context


def run(settings: Settings, args: argparse.Namespace) -> int:
    problem = check(args)
    if problem is not None:
        return fail(problem, EXIT_USAGE)
    context = None
    if args.tls_cert:
        try:
            context = tls_context(args.tls_cert, args.tls_key)
        except ValueError as exc:
            return fail(f"cannot serve HTTPS: {exc}", EXIT_USAGE)
    try:  # before anything is printed: a taken port is one line, not a banner and then an error
        _probe(args.host, args.port)
    except OSError as exc:
        return _bind_failed(exc, args)
    token = None if args.no_token else secrets.token_urlsafe(24)
    where = served(args.host, args.port, tuple(args.public_host), tls=context is not None)
    server = build_server(Options(child_command(args), args.host, args.port, where, token, args.max_pages,
                                  context))
    what = "the wallboard" if args.wallboard else "gputui"
    mode = "read-only" if not args.allow_writes else "WRITES ALLOWED"
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving {what} ({mode}) on {where.scheme}://{host}:{args.port}/", flush=True)
    if token:
        # Shown once, here, to the operator who started it; the page asks for it.
        print(f"token (the page asks for it; not shown again): {token}", flush=True)
    else:
        writes = " and write to the cluster" if args.allow_writes else ""
        print(f"warning: --no-token: every user and program on this machine can open the page{writes}",
              file=sys.stderr, flush=True)
    if context is None and not is_loopback(args.host):
        print("warning: --insecure-http: the token and the login cookie cross the network in clear",
              file=sys.stderr, flush=True)
    try:
        server.serve()
    except OSError as exc:  # taken between the probe and the listen
        return _bind_failed(exc, args)
    return 0


def _probe(host: str, port: int) -> None:
    """Bind as the server will (address reuse on, as aiohttp sets it), and let go."""
    for family, kind, proto, _name, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)


def _bind_failed(exc: OSError, args: argparse.Namespace) -> int:
    if exc.errno == errno.EADDRINUSE:
        return fail(f"port {args.port} on {args.host} is taken: choose another with --port", EXIT_USAGE)
    return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", EXIT_USAGE)
