"""`gputui serve`: gputui in a browser, through textual-serve (each page runs its own gputui process, fed over a
websocket). Read-only unless --allow-writes: the child gets --read-only, so no writer exists in it at all.
Loopback by default; any other address needs a token, printed once at start and never logged: the page asks
for it, and a cookie carries it afterwards (never in a URL, so never in a log or a browser history). The
wallboard starts by itself in the page: a wall screen has nobody to click."""

from __future__ import annotations

import argparse
import asyncio
import errno
import hmac
import ipaddress
import secrets
import shlex
import signal
import sys
from html import escape
from typing import Any

from gputui.cli.common import EXIT_USAGE, fail
from gputui.settings import Settings

COOKIE = "gputui_token"
# Flags of the parent's command line the page's gputui gets too (the config file and GPUTUI_* reach it anyway).
PASSED = {"demo": "--demo", "seed": "--seed", "kubeconfig": "--kubeconfig", "context": "--context",
          "namespace": "--namespace", "prometheus": "--prometheus", "dcgm_interval": "--dcgm-interval",
          "config": "--config", "refresh": "--refresh", "theme": "--theme", "keymap": "--keymap",
          "wallboard_rotate": "--rotate", "debug": "--debug"}  # each page's gputui appends to the debug file
LOGIN_PAGE = """<!DOCTYPE html><html><head><title>gputui</title><style>
body {{ background: #0c181f; color: #eee; font-family: monospace; display: flex; height: 90vh;
        align-items: center; justify-content: center; }}
input, button {{ font: inherit; padding: 8px; margin: 4px; }}</style></head>
<body><form method="post" action="/login"><p>gputui on {host}: the token printed when it started</p>
<p>{error}</p><input type="password" name="token" autofocus><button type="submit">Open</button></form></body></html>"""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    return shlex.join(argv)


def run(settings: Settings, args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        return fail(f"--port must be between 1 and 65535, got {args.port}", EXIT_USAGE)
    if args.wallboard and args.allow_writes:
        return fail("--wallboard is read-only: drop --allow-writes", EXIT_USAGE)
    try:  # before anything is printed: a taken port is one line, not a banner and then an error
        _probe(args.host, args.port)
    except OSError as exc:
        return _bind_failed(exc, args)
    token = None if is_loopback(args.host) else secrets.token_urlsafe(24)
    server = _server(child_command(args), args.host, args.port, token)
    what = "the wallboard" if args.wallboard else "gputui"
    mode = "read-only" if not args.allow_writes else "WRITES ALLOWED"
    print(f"serving {what} ({mode}) on http://{args.host}:{args.port}/", flush=True)
    if token:
        # Shown once, here, to the operator who started it; the page asks for it.
        print(f"token (the page asks for it; not shown again): {token}", flush=True)
    try:
        server.serve()
    except OSError as exc:  # taken between the probe and the listen
        return _bind_failed(exc, args)
    return 0


def _probe(host: str, port: int) -> None:
    """Bind as the server will (address reuse on, as aiohttp sets it), and let go."""
    import socket

    for family, kind, proto, _name, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)


def _bind_failed(exc: OSError, args: argparse.Namespace) -> int:
    if exc.errno == errno.EADDRINUSE:
        return fail(f"port {args.port} on {args.host} is taken: choose another with --port", EXIT_USAGE)
    return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", EXIT_USAGE)


def _server(command: str, host: str, port: int, token: str | None) -> Any:
    from aiohttp import web
    from textual_serve.server import Server

    class GputuiServer(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.router.add_post("/login", self.login)
            app.middlewares.append(self.guard)
            return app

        @web.middleware
        async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
            if token is None or request.path.startswith("/static/") or request.path == "/login":
                return await handler(request)
            if hmac.compare_digest(request.cookies.get(COOKIE, ""), token):
                return await handler(request)
            if request.path == "/":
                return web.Response(text=LOGIN_PAGE.format(host=escape(request.host), error=""),
                                    content_type="text/html")
            raise web.HTTPForbidden(text="the token is missing or wrong")

        async def login(self, request: web.Request) -> web.StreamResponse:
            given = str((await request.post()).get("token", ""))
            if token is not None and hmac.compare_digest(given, token):
                response = web.HTTPSeeOther("/")
                response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
                return response
            return web.Response(text=LOGIN_PAGE.format(host=escape(request.host), error="That is not the token."),
                                content_type="text/html", status=403)

        async def handle_index(self, request: web.Request) -> Any:
            # The page's websocket goes back to the address the browser used (not 0.0.0.0, not a guess).
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def on_startup(self, app: web.Application) -> None:
            pass  # the one line run() printed says it all (no banner)

        def serve(self, debug: bool = False) -> None:
            # As textual-serve's, without its access log: a request line is nothing an operator needs, and
            # nothing secret must ever reach a log.
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                        access_log=None, print=lambda *a: None, shutdown_timeout=3.0)

    return GputuiServer(command, host=host, port=port, title="gputui")
