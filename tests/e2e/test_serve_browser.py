"""`gputui serve` in a real browser and against a hostile one: Debian's chromium logs in with the token
printed at start, the board reaches the page by itself, the page loads nothing from another origin, and the
served gputui writes nothing. A raw websocket client (aiohttp's) plays the attacker: another Origin (a page
at evil.example), another Host (DNS rebinding), no cookie; each is refused before any gputui starts. The
screenshot is saved for a person to look at (GPUTUI_SCREENSHOT_DIR keeps a copy: the README's picture comes
from here)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from http.cookies import SimpleCookie
from pathlib import Path

import aiohttp
import pytest

from tests.support.browser import Browser
from tests.support.procs import free_port, port_is_free, wait_until

EVIL = "https://evil.example"


class Served:
    def __init__(self, proc: subprocess.Popen, port: int, out: Path, err: Path, tls: bool) -> None:
        self.proc, self.port, self.out, self.err = proc, port, out, err
        self.scheme = "https" if tls else "http"
        self.origin = f"{self.scheme}://127.0.0.1:{port}"
        # Both lines are printed before serve listens: the token's is the second ("" when there is none).
        lines = wait_until(lambda: self.out.read_text().splitlines(), 10, what="serve's first line")
        self.token = lines[1].rsplit(": ", 1)[1].strip() if len(lines) > 1 and lines[1].startswith("token") else ""

    @property
    def ws_url(self) -> str:
        return f"{'wss' if self.scheme == 'https' else 'ws'}://127.0.0.1:{self.port}/ws"


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(*args: str, tls: bool = False) -> Served:
        port = free_port()
        env = dict(os.environ, HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"),
                   XDG_CONFIG_HOME=str(tmp_path / "config"))
        # Files, not pipes: each page's gputui writes its stderr to serve's stdout, and a full pipe would stall it.
        out, err = tmp_path / f"serve-{port}.out", tmp_path / f"serve-{port}.err"
        with out.open("w") as stdout, err.open("w") as stderr:
            proc = subprocess.Popen([sys.executable, "-m", "gputui", "--demo", "serve", "--port", str(port), *args],
                                    stdout=stdout, stderr=stderr, text=True, env=env)
        started.append(proc)
        wait_until(lambda: proc.poll() is not None or not port_is_free(port), 30, what="gputui serve listening")
        assert proc.poll() is None, err.read_text()
        return Served(proc, port, out, err, tls)

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path / "chromium")
    yield b
    b.close()


# ----- the raw client: what an attacker's page or script can send ---------------------------------------

def _session() -> aiohttp.ClientSession:
    # No cookie jar: each request carries exactly the cookie the test gives it. No TLS check: a test cert.
    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), connector=aiohttp.TCPConnector(ssl=False))


def log_in(served: Served, token: str | None = None) -> tuple[int, str]:
    """POST the login form as the page does; the status and the Set-Cookie header's text."""
    async def go() -> tuple[int, str]:
        async with _session() as http, http.post(f"{served.origin}/login", data={"token": served.token if token is None else token},
                                                 headers={"Origin": served.origin}, allow_redirects=False) as r:
            return r.status, r.headers.get("Set-Cookie", "")
    return asyncio.run(go())


def cookie_of(set_cookie: str) -> str:
    jar = SimpleCookie()
    jar.load(set_cookie)
    (name, morsel), = jar.items()
    return f"{name}={morsel.value}"


def websocket(served: Served, origin: str | None, cookie: str | None = None, host: str | None = None) -> int:
    """The handshake's status: 101 when the websocket opened (it is then closed at once after the first frame
    of the page's gputui arrived, the proof it ran), else the refusal's status."""
    headers = {k: v for k, v in (("Cookie", cookie), ("Host", host)) if v is not None}

    async def go() -> int:
        async with _session() as http:
            try:
                async with http.ws_connect(served.ws_url, origin=origin, headers=headers) as ws:
                    await asyncio.wait_for(ws.receive(), 30)
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status
    return asyncio.run(go())


def get(served: Served, path: str = "/", **headers: str) -> tuple[int, dict[str, str], str]:
    async def go() -> tuple[int, dict[str, str], str]:
        async with _session() as http, http.get(f"{served.origin}{path}", headers=headers, allow_redirects=False) as r:
            return r.status, dict(r.headers), await r.text(errors="replace")
    return asyncio.run(go())


def audit_lines(tmp_path: Path) -> str:
    audit = tmp_path / "state" / "gputui" / "audit-demo.jsonl"
    return audit.read_text() if audit.exists() else ""


# ----- in Chromium ----------------------------------------------------------------------------------------

def test_the_wallboard_starts_by_itself_in_chromium_after_the_login_and_is_read_only(serve, browser, tmp_path):
    served = serve("--wallboard")
    assert len(served.token) >= 24  # loopback too asks for the token
    started = time.monotonic()
    browser.log_in(f"http://127.0.0.1:{served.port}/", served.token)
    browser.wait_for_text("GPUs in use", "Idle GPUs", "Fleet heat map")  # no click: a wall has nobody to click
    board = time.monotonic() - started
    text = browser.received_text()
    assert "SIMULATED" in text and "READ-ONLY" in text  # the demo says it is simulated, the page that it is RO
    # The picture shows the heat map: its legend and rows have reached the page, and the page has painted
    # since (its font loaded, two animation frames: the terminal draws what it was sent at the next one).
    browser.wait_for_text("no data", "fault", "gpu-")
    browser.evaluate("document.fonts.ready.then(() => new Promise(done => "
                     "requestAnimationFrame(() => requestAnimationFrame(() => done(true)))))")
    shot = browser.screenshot(tmp_path / "serve-wallboard.png")
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("GPUTUI_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["GPUTUI_SCREENSHOT_DIR"]) / shot.name)
    print(f"board in the page after the login: {board:.2f}s; screenshot: {shot}")


def test_the_page_loads_nothing_from_another_origin_and_its_policy_blocks_nothing_it_needs(serve, browser):
    served = serve("--wallboard")
    browser.log_in(f"http://127.0.0.1:{served.port}/", served.token)
    browser.wait_for_text("GPUs in use")
    urls = browser.evaluate("[...document.querySelectorAll('[src],[href]')].map(e => e.src || e.href)"
                            ".concat(performance.getEntriesByType('resource').map(e => e.name))")
    assert urls and all(u.startswith(f"http://127.0.0.1:{served.port}/") for u in urls), urls
    assert browser.violations() == []  # the terminal drew under the policy: nothing it needs was blocked
    assert browser.evaluate("document.fonts.check('16px \"Roboto Mono\"')")  # the font, from our own /static


def test_the_served_dashboard_cannot_write_nor_leave_its_context(serve, browser, tmp_path):
    """Not the wallboard: the dashboard, whose keys write elsewhere. Served, it has no writer: `c` answers
    read-only and nothing reaches the (demo's) audit log; `:ctx` and `:fleet` answer that it is pinned."""
    served = serve()
    browser.log_in(f"http://127.0.0.1:{served.port}/", served.token)
    browser.wait_for_text("Nodes 27", "Inference services")
    browser.type("c")
    browser.wait_for_text("read-only: cordon is unavailable")
    browser.type("r")
    browser.wait_for_text("read-only: drain is unavailable")
    browser.type(":")
    browser.wait_for_text("tab completes")  # the command line is up: what is typed now goes to it
    browser.type("fleet\r")
    browser.wait_for_text("pinned to")
    assert audit_lines(tmp_path) == ""


def test_away_from_loopback_the_page_asks_for_the_token_and_a_taken_port_is_one_line(serve, browser, tmp_path):
    served = serve("--wallboard", "--host", "0.0.0.0", "--insecure-http")
    assert "--insecure-http" in served.err.read_text()  # the one-line warning
    token = served.token
    browser.navigate(f"http://127.0.0.1:{served.port}/")
    wait_until(lambda: "the token printed" in browser.page_text(), 15, what="the token form")
    browser.evaluate("document.querySelector('input[name=token]').value = 'wrong'; document.forms[0].submit()")
    wait_until(lambda: "That is not the token" in browser.page_text(), 15, what="the refusal")
    browser.log_in(f"http://127.0.0.1:{served.port}/", token)
    browser.wait_for_text("GPUs in use")
    assert token not in browser.evaluate("location.href")  # carried by a cookie, never in a URL
    assert token not in browser.evaluate("document.cookie")  # and the cookie is not the token (nor readable)
    taken = subprocess.run([sys.executable, "-m", "gputui", "--demo", "serve", "--host", "0.0.0.0", "--insecure-http",
                            "--port", str(served.port)], capture_output=True, text=True, timeout=30)
    assert taken.returncode == 2 and taken.stderr.strip() == \
        f"gputui: error: port {served.port} on 0.0.0.0 is taken: choose another with --port"
    served.proc.terminate()
    served.proc.wait(timeout=10)
    assert served.out.read_text().count(token) == 1 and token not in served.err.read_text()  # printed once


def test_over_https_chromium_logs_in_and_the_cookie_is_secure(serve, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    served = serve("--wallboard", "--tls-cert", str(cert), "--tls-key", str(key), tls=True)
    assert served.out.read_text().startswith(f"serving the wallboard (read-only) on https://127.0.0.1:{served.port}/")
    status, set_cookie = log_in(served)
    assert status == 303
    attributes = set_cookie.lower()
    assert set_cookie.startswith(f"__Host-gputui_login_{served.port}=") and "secure" in attributes
    assert "httponly" in attributes and "samesite=strict" in attributes and "max-age=43200" in attributes
    assert served.token not in set_cookie
    b = Browser(tmp_path / "chromium", extra_args=("--ignore-certificate-errors",))
    try:
        b.log_in(f"https://127.0.0.1:{served.port}/", served.token)
        b.wait_for_text("GPUs in use")
    finally:
        b.close()


# ----- the attacker's side ----------------------------------------------------------------------------------

def test_a_websocket_from_another_origin_or_to_another_host_is_refused(serve):
    served = serve()
    # A page at evil.example opening ws://127.0.0.1:port/ws (cross-site websocket hijacking)
    assert websocket(served, EVIL) == 403
    rebound = f"evil.example:{served.port}"  # DNS rebinding: evil.example now resolves to 127.0.0.1
    assert get(served, "/", Host=rebound)[0] == 403
    status, set_cookie = log_in(served)
    assert status == 303
    cookie = cookie_of(set_cookie)
    assert websocket(served, EVIL, cookie) == 403  # even were the victim's cookie sent along
    assert websocket(served, None, cookie) == 403  # a websocket with no Origin is no browser's of ours
    assert websocket(served, f"http://{rebound}", cookie, host=rebound) == 403  # the rebound page, same-origin
    assert get(served, "/static/js/textual.js", Host="evil.example")[0] == 403
    assert websocket(served, served.origin, cookie) == 101  # the page's own websocket opens (and runs gputui)


def test_no_cookie_no_websocket_and_a_logged_out_cookie_is_dead(serve):
    served = serve()
    assert websocket(served, served.origin) == 403
    assert websocket(served, served.origin, f"gputui_login_{served.port}={served.token}") == 403  # not the token
    cookie = cookie_of(log_in(served)[1])

    async def logout() -> None:
        async with _session() as http, http.post(f"{served.origin}/logout", headers={"Origin": served.origin, "Cookie": cookie},
                                                 allow_redirects=False) as r:
            assert r.status == 303 and "Max-Age=0" in r.headers["Set-Cookie"]
    asyncio.run(logout())
    assert websocket(served, served.origin, cookie) == 403


def test_with_writes_allowed_an_attacker_origin_cannot_open_the_websocket_at_all(serve, tmp_path):
    served = serve("--allow-writes")
    assert "WRITES ALLOWED" in served.out.read_text()
    attackers = ((EVIL, None), ("http://evil.example", None), ("null", None),
                 (f"http://evil.example:{served.port}", f"evil.example:{served.port}"),  # DNS rebinding
                 (f"http://localhost:{served.port}", None))  # another origin, even one of ours
    for origin, host in attackers:
        assert websocket(served, origin, None, host) == 403, origin
    cookie = cookie_of(log_in(served)[1])
    for origin, host in attackers:  # a cookie would not help either (SameSite=Strict keeps it home anyway)
        assert websocket(served, origin, cookie, host) == 403, origin
    assert audit_lines(tmp_path) == ""  # no gputui ran for them, nothing was cordoned
    log = served.out.read_text() + served.err.read_text()
    assert "Traceback" not in log


def test_logins_are_rate_limited_and_odd_tokens_or_cookies_are_a_403_never_a_500(serve):
    served = serve()
    assert log_in(served, "tökén-ünicode")[0] == 403
    assert get(served, "/", Cookie=f"gputui_login_{served.port}=ünï.1.x")[0] == 200  # the login form again
    for _ in range(4):
        assert log_in(served, "wrong")[0] == 403
    assert log_in(served, "wrong")[0] == 429  # five failures in a minute: wait
    assert log_in(served)[0] == 429  # even the right token, from this client, for now
    assert "Traceback" not in served.out.read_text() + served.err.read_text()
    assert served.out.read_text().count(served.token) == 1 and served.token not in served.err.read_text()


def test_every_answer_carries_the_security_headers_and_static_lists_no_directory(serve):
    served = serve()
    for path in ("/", "/static/js/textual.js", "/nothing", "/static/"):
        status, headers, body = get(served, path)
        assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff", path
        assert headers["Referrer-Policy"] == "no-referrer", path
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "googleapis" not in policy, path
    for listing in ("/static/", "/static/js/", "/static/fonts"):
        status, _headers, body = get(served, listing)
        assert status in (403, 404) and "textual.js" not in body and "Roboto" not in body, listing
    assert get(served, "/", Host=f"evil.example:{served.port}")[1]["X-Frame-Options"] == "DENY"


def test_pages_past_max_pages_are_refused_clearly(serve):
    served = serve("--max-pages", "1")
    cookie = cookie_of(log_in(served)[1])

    async def go() -> None:
        async with _session() as http, http.ws_connect(served.ws_url, origin=served.origin, headers={"Cookie": cookie}) as first:
            await asyncio.wait_for(first.receive(), 30)  # its gputui runs
            with pytest.raises(aiohttp.WSServerHandshakeError) as second:
                await http.ws_connect(served.ws_url, origin=served.origin, headers={"Cookie": cookie})
            assert second.value.status == 503
            async with http.get(f"{served.origin}/", headers={"Cookie": cookie}) as page:
                assert page.status == 503 and "--max-pages 1" in await page.text()
    asyncio.run(go())
    wait_until(lambda: get(served, "/", Cookie=cookie)[0] == 200, 15, what="the place freed")


def test_serve_refuses_unsafe_starts_in_one_line(tmp_path):
    def start(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gputui", "--demo", "serve", "--port", str(free_port()), *args],
                              capture_output=True, text=True, timeout=30)
    plain = start("--host", "0.0.0.0")
    assert plain.returncode == 2 and len(plain.stderr.splitlines()) == 1 and "--tls-cert" in plain.stderr
    assert plain.stdout == ""
    no_token = start("--host", "0.0.0.0", "--no-token", "--insecure-http")
    assert no_token.returncode == 2 and "loopback only" in no_token.stderr and len(no_token.stderr.splitlines()) == 1
    (tmp_path / "c.pem").write_text("nope")
    bad = start("--tls-cert", str(tmp_path / "c.pem"), "--tls-key", str(tmp_path / "c.pem"))
    assert bad.returncode == 2 and bad.stderr.startswith("gputui: error: cannot serve HTTPS: ")
    assert len(bad.stderr.splitlines()) == 1


def test_no_token_on_loopback_warns_once_and_still_checks_origin(serve):
    served = serve("--no-token")
    warning = served.err.read_text().splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: --no-token")
    assert "token" not in served.out.read_text()
    assert websocket(served, EVIL) == 403
    assert websocket(served, served.origin) == 101
