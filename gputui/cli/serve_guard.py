"""What stands between a browser and `gputui serve`'s pages: the Host and Origin checks (DNS rebinding,
cross-site websocket hijacking), signed expiring login cookies, the login rate limit and the security
headers. Plain functions and small classes, testable without a server; `guard_middleware` and
`add_headers` put them in front of the aiohttp app (gputui.cli.serve_app)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# Names a browser may use for a loopback server; a rebound DNS name (evil.example -> 127.0.0.1) is none of them.
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
LOGIN_TTL = 12 * 3600.0  # seconds a login lasts: a working day, so a stolen cookie does not live for ever
# Paths reachable without a login: the login form's target, the logout, and textual-serve's own assets
# (xterm, fonts: nothing of the cluster). Everything else, "/" and the websocket first, needs a login.
PUBLIC_PREFIXES = ("/static/",)
PUBLIC_PATHS = frozenset({"/login", "/logout", "/page.js"})
NULL_ORIGIN_FORMS = frozenset({"/login", "/logout"})  # see refusal()
_NAME = re.compile(r"[A-Za-z0-9._-]+")  # a DNS name or an IPv4 address: nothing that could end a header's field


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def canonical(host: str) -> str:
    """One spelling per address: lower case, IPv6 compressed and unbracketed, IPv4-mapped IPv6 as IPv4 (a
    dual-stack socket reports 127.0.0.1 as ::ffff:127.0.0.1), no zone."""
    host = host.strip("[]").split("%", 1)[0].lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def is_host_name(value: str) -> bool:
    """A DNS name or an IP address, no port: what --public-host takes."""
    try:
        ipaddress.ip_address(value.strip("[]"))
        return True
    except ValueError:
        return bool(_NAME.fullmatch(value))


def split_host(value: str, default_port: int) -> tuple[str, int] | None:
    """A Host header (or an origin's authority) as (canonical host, port); None when malformed."""
    if not value or not value.isascii():
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
        try:
            ipaddress.IPv6Address(host)  # no zone either: a browser never sends one
        except ValueError:
            return None
    else:
        host, _, port_text = value.partition(":")
        if not _NAME.fullmatch(host):  # nor is an unbracketed IPv6 address
            return None
    if port_text == "":
        port = default_port
    elif port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        return None
    return canonical(host), port


@dataclass(frozen=True)
class Served:
    """Where serve listens: the port, the names a browser may call it by, and whether it speaks TLS."""

    port: int
    names: frozenset[str]
    tls: bool = False

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"


def served(host: str, port: int, public_hosts: tuple[str, ...] = (), tls: bool = False) -> Served:
    """--host (and, on loopback, its three usual spellings) plus the --public-host names."""
    names = {canonical(host), *(canonical(h) for h in public_hosts)}
    if is_loopback(host):
        names |= LOOPBACK_NAMES
    return Served(port, frozenset(names), tls)


def host_ok(header: str | None, where: Served, local_ip: str | None = None) -> bool:
    """The Host a request names is one of ours. Besides the configured names, the address the connection
    arrived on is ours by definition (a 0.0.0.0 bind reached at 10.0.0.5), and so are the loopback names when
    it arrived on loopback. A rebound DNS name (evil.example pointing at us) never is."""
    parsed = split_host(header or "", 443 if where.tls else 80)
    if parsed is None or parsed[1] != where.port:
        return False
    name = parsed[0]
    if name in where.names:
        return True
    if local_ip is None:
        return False
    local = canonical(local_ip)
    return name == local or (is_loopback(local) and name in LOOPBACK_NAMES)


def origin_ok(origin: str | None, host_header: str, where: Served) -> bool:
    """The Origin is the page's own: our scheme, and the host and port the request's Host names (which
    host_ok has already accepted). "null", another scheme, host or port: not ours."""
    if not origin:
        return False
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    if parts.scheme != where.scheme or parts.path or parts.query or parts.fragment or parts.username:
        return False
    default = 443 if where.tls else 80
    mine = split_host(host_header, default)
    return mine is not None and split_host(parts.netloc, default) == mine


def refusal(headers: Mapping[str, str], where: Served, local_ip: str | None, method: str = "GET",
            path: str = "/") -> str | None:
    """Why a request must be refused (403), or None. Any request: its Host must be ours, and its Origin, when
    it has one, the page's own. A websocket upgrade must carry an Origin: browsers always send one, so a
    missing one is not a browser of ours, and the websocket is the dashboard itself. One exception: under
    Referrer-Policy: no-referrer a browser sends `Origin: null` with a form's POST, so the login and logout
    forms' posts may carry "null" (the login still needs the token; a logout harms nobody)."""
    host = headers.get("Host")
    if not host_ok(host, where, local_ip):
        return "this server does not answer to that Host"
    origin = headers.get("Origin")
    websocket = headers.get("Upgrade", "").lower() == "websocket"
    if origin == "null" and not websocket and method == "POST" and path in NULL_ORIGIN_FORMS:
        return None
    if (websocket or origin is not None) and not origin_ok(origin, host or "", where):
        return "cross-origin requests are refused"
    return None


def as_bytes(text: str) -> bytes:
    """Any str as bytes, never an error: aiohttp keeps undecodable header bytes as lone surrogates."""
    return text.encode("utf-8", "surrogatepass")


def token_matches(given: str, token: str) -> bool:
    """Constant-time, on bytes: compare_digest refuses non-ASCII str (a TypeError, once a 500)."""
    return hmac.compare_digest(as_bytes(given), as_bytes(token))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign(secret: bytes, login_id: str, expiry: int) -> str:
    """A cookie value: login id, expiry (epoch seconds) and an HMAC-SHA256 of both under the process's key."""
    body = f"{login_id}.{expiry}"
    return f"{body}.{_b64(hmac.new(secret, as_bytes(body), hashlib.sha256).digest())}"


def verify(secret: bytes, value: str | None, now: float) -> str | None:
    """The login id of a cookie signed with this key and not expired; None for anything else."""
    if not value or value.count(".") != 2:
        return None
    login_id, expiry_text, _mac = value.split(".")
    if not (expiry_text.isascii() and expiry_text.isdigit()):
        return None
    if not hmac.compare_digest(as_bytes(value), as_bytes(sign(secret, login_id, int(expiry_text)))):
        return None
    return login_id if now < int(expiry_text) else None


@dataclass
class Logins:
    """Signed, expiring logins. The key lives in this process only: a restart logs everybody out, and no
    cookie is ever the token itself. Logged-out ids are remembered until their cookie would have expired."""

    ttl: float = LOGIN_TTL
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    revoked: dict[str, float] = field(default_factory=dict)

    def new(self, now: float) -> str:
        return sign(self.secret, secrets.token_urlsafe(18), int(now + self.ttl))

    def valid(self, value: str | None, now: float) -> bool:
        login_id = verify(self.secret, value, now)
        return login_id is not None and login_id not in self.revoked

    def revoke(self, value: str | None, now: float) -> None:
        login_id = verify(self.secret, value, now)
        self.revoked = {k: t for k, t in self.revoked.items() if t > now}  # forget those expired anyway
        if login_id is not None:
            self.revoked[login_id] = now + self.ttl


@dataclass
class RateLimit:
    """Failed logins per client address: `limit` within `window` seconds, then refused until the oldest ages
    out. Bounded: past `max_clients` addresses, the longest quiet one is forgotten."""

    limit: int = 5
    window: float = 60.0
    max_clients: int = 10_000
    failures: dict[str, deque[float]] = field(default_factory=dict)

    def wait(self, client: str, now: float) -> float:
        """Seconds before this client may try again (0: now)."""
        seen = self.failures.get(client)
        if seen is None:
            return 0.0
        while seen and seen[0] <= now - self.window:
            seen.popleft()
        if not seen:
            del self.failures[client]
            return 0.0
        return seen[0] + self.window - now if len(seen) >= self.limit else 0.0

    def failed(self, client: str, now: float) -> None:
        if client not in self.failures and len(self.failures) >= self.max_clients:
            quiet = min(self.failures, key=lambda c: self.failures[c][-1] if self.failures[c] else 0.0)
            del self.failures[quiet]
        self.failures.setdefault(client, deque()).append(now)

    def succeeded(self, client: str) -> None:
        self.failures.pop(client, None)


def csp(host: str | None, tls: bool) -> str:
    """No third-party origin anywhere: textual-serve's own template pulls Roboto Mono from Google Fonts; our
    page serves the copy textual-serve ships. Styles stay 'unsafe-inline' because xterm.js writes <style>
    elements at run time; scripts are only our own files (no inline script, no eval)."""
    socket = f" {'wss' if tls else 'ws'}://{host}" if host else ""  # 'self' covers ws: in CSP3, not everywhere
    return ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; font-src 'self'; "
            f"img-src 'self'; connect-src 'self'{socket}; form-action 'self'; base-uri 'none'; "
            "frame-ancestors 'none'")


def security_headers(host: str | None, tls: bool, path: str) -> dict[str, str]:
    headers = {
        "Content-Security-Policy": csp(host, tls),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
    }
    if not path.startswith(PUBLIC_PREFIXES):
        headers["Cache-Control"] = "no-store"  # a page, a login answer: nothing for a shared cache to keep
    return headers


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def local_address(request: Any) -> str | None:
    """The address this connection arrived on (the served address a browser used)."""
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    return sockname[0] if isinstance(sockname, tuple) and sockname else None


ACCEPTED = "gputui.host_accepted"
Handler = Callable[[Any], Awaitable[Any]]


def guard_middleware(where: Served, logins: Logins | None, cookie: str,
                     login_page: Callable[[Any], Any]) -> Any:
    """The aiohttp middleware: Host and Origin on every request, then a login on all but the public paths
    ("/" without one answers the login form). `logins` None: --no-token (loopback only)."""
    from aiohttp import web  # noqa: PLC0415 (aiohttp, ~130 ms: serve's argument checks import this module)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        why = refusal(request.headers, where, local_address(request), request.method, request.path)
        if why is not None:
            raise web.HTTPForbidden(text=why)
        request[ACCEPTED] = True
        if logins is None or is_public(request.path) or logins.valid(request.cookies.get(cookie), time.time()):
            return await handler(request)
        if request.path == "/" and request.method == "GET":
            return login_page(request)
        raise web.HTTPForbidden(text="log in first: the page asks for the token printed when serve started")

    return guard


async def add_headers(request: Any, response: Any) -> None:
    """on_response_prepare: every answer, errors, static files and the websocket's handshake included."""
    # Only a Host the guard accepted goes into the policy; a refused request gets the policy without it.
    host = request.headers.get("Host") if request.get(ACCEPTED) else None
    response.headers.update(security_headers(host, request.scheme == "https", request.path))
