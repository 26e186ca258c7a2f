"""The web side of `gputui serve`: textual-serve's Server (each websocket runs one gputui process) behind
gputui.cli.serve_guard, with our own routes: no directory listing, no download route (gputui delivers no
files), a login that makes a signed login rather than storing the token, and a cap on the pages open."""

from __future__ import annotations

import asyncio
import math
import signal
import ssl
import time
from dataclasses import dataclass
from typing import Any

from gputui.cli import serve_guard as guard
from gputui.cli import serve_pages as pages


@dataclass(frozen=True)
class Options:
    command: str  # the gputui each page runs (serve.child_command)
    host: str
    port: int
    where: guard.Served
    token: str | None  # None: --no-token, loopback only
    max_pages: int
    ssl_context: ssl.SSLContext | None = None


def cookie_name(port: int, tls: bool) -> str:
    """Cookies are not kept per port: two serves on one machine must not overwrite each other's. Under TLS
    the __Host- prefix makes the browser insist on Secure, Path=/ and no Domain."""
    return f"{'__Host-' if tls else ''}gputui_login_{port}"


def full_message(limit: int) -> str:
    return (f"{limit} page{'s are' if limit != 1 else ' is'} open already, the most this gputui serve allows "
            f"(--max-pages {limit}): close one, then reload this page.")


def font_size(text: str) -> int:
    try:
        return min(max(int(text), 6), 64)
    except ValueError:
        return 16


def build_server(options: Options) -> Any:
    from aiohttp import web  # noqa: PLC0415 (aiohttp, ~130 ms: not until the server is built)
    from textual_serve.server import Server  # noqa: PLC0415 (textual_serve, ~60 ms: not until the server is built)

    tls = options.where.tls
    logins = guard.Logins() if options.token is not None else None
    limit = guard.RateLimit()
    cookie = cookie_name(options.port, tls)

    def login_form(request: web.Request, error: str = "", status: int = 200) -> web.Response:
        return web.Response(text=pages.login_page(request.host, error), content_type="text/html", status=status)

    class GputuiServer(Server):
        open_pages = 0  # websockets open, each a gputui process

        async def _make_app(self) -> web.Application:
            app = web.Application(middlewares=[guard.guard_middleware(options.where, logins, cookie, login_form)])
            app.router.add_get("/", self.handle_index)
            app.router.add_get("/ws", self.handle_websocket)
            app.router.add_get("/page.js", self.page_js)
            app.router.add_post("/login", self.login)
            app.router.add_route("*", "/logout", self.logout)
            # textual-serve's own static route lists its directory (show_index=True): ours does not.
            app.router.add_static("/static", self.statics_path, show_index=False, follow_symlinks=False)
            app.on_response_prepare.append(guard.add_headers)
            return app

        async def handle_index(self, request: web.Request) -> web.Response:
            if self.open_pages >= options.max_pages:
                return web.Response(text=pages.note_page(full_message(options.max_pages)),
                                    content_type="text/html", status=503)
            # The websocket goes back to the address the browser used (the guard has accepted it).
            websocket = f"{'wss' if tls else 'ws'}://{request.host}/ws"
            page = pages.terminal_page("gputui", websocket, font_size(request.query.get("fontsize", "16")),
                                       logout=logins is not None)
            return web.Response(text=page, content_type="text/html")

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            if self.open_pages >= options.max_pages:  # one page raced another past the index's check
                raise web.HTTPServiceUnavailable(text=full_message(options.max_pages))
            self.open_pages += 1  # before any await: two handshakes cannot both take the last place
            try:
                return await super().handle_websocket(request)
            finally:
                self.open_pages -= 1

        async def page_js(self, request: web.Request) -> web.Response:
            return web.Response(text=pages.PAGE_JS, content_type="application/javascript")

        async def login(self, request: web.Request) -> web.StreamResponse:
            client = request.remote or "unknown"
            wait = limit.wait(client, time.monotonic())
            if wait > 0:
                raise web.HTTPTooManyRequests(text="too many wrong tokens: wait a minute",
                                              headers={"Retry-After": str(math.ceil(wait))})
            if options.token is None or logins is None:  # --no-token: nothing to log in to
                raise web.HTTPSeeOther("/")
            try:
                given = (await request.post()).get("token")
            except ValueError:  # a body that is not UTF-8: no token of ours
                given = None
            if not isinstance(given, str) or not guard.token_matches(given, options.token):
                limit.failed(client, time.monotonic())
                return login_form(request, "That is not the token.", 403)
            limit.succeeded(client)
            done = web.HTTPSeeOther("/")
            done.set_cookie(cookie, logins.new(time.time()), max_age=int(logins.ttl), path="/",
                            httponly=True, samesite="Strict", secure=tls or None)
            raise done

        async def logout(self, request: web.Request) -> web.StreamResponse:
            if logins is not None:
                logins.revoke(request.cookies.get(cookie), time.time())
            done = web.HTTPSeeOther("/")
            done.del_cookie(cookie, path="/", secure=tls or None, httponly=True, samesite="Strict")
            raise done

        def serve(self, debug: bool = False) -> None:
            # As textual-serve's, without its access log and banner: a request line is nothing an operator
            # needs, and nothing secret must ever reach a log.
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                        access_log=None, print=lambda *a: None, shutdown_timeout=3.0,
                        ssl_context=options.ssl_context)

    return GputuiServer(options.command, host=options.host, port=options.port, title="gputui")
