import re
import shlex
from types import SimpleNamespace

import pytest

from gputui.cli import serve_guard as guard
from gputui.cli.parser import build_parser, settings_from
from gputui.cli.serve import check, child_command, is_loopback, run
from gputui.cli.serve_pages import login_page, terminal_page
from gputui.settings import Settings


def argv_of(*args: str) -> list[str]:
    return shlex.split(child_command(build_parser().parse_args(list(args))))[3:]  # after "python -m gputui"


def serve_args(*args: str):
    return build_parser().parse_args(["serve", *args])


def test_the_pages_gputui_is_read_only_unless_writes_are_allowed_and_keeps_the_flags_given():
    assert argv_of("--demo", "serve", "--wallboard") == ["--demo", "--read-only", "--wallboard", "--pin-context"]
    assert argv_of("serve", "--context", "prod-eu", "--refresh", "5", "--allow-writes") == [
        "--context", "prod-eu", "--refresh", "5.0", "--pin-context"]
    assert "--read-only" in argv_of("--kubeconfig", "/k a", "serve")
    assert argv_of("--kubeconfig", "/k a", "serve")[:2] == ["--kubeconfig", "/k a"]  # quoted for the shell
    assert argv_of("serve", "--debug")[-3:] == ["--debug", "--read-only", "--pin-context"]  # it logs (to its file)


def test_serves_own_flags_never_reach_the_pages_gputui():
    argv = argv_of("serve", "--host", "0.0.0.0", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--max-pages", "2",
                   "--public-host", "wall.example.com", "--insecure-http")
    assert argv == ["--read-only", "--pin-context"]


def test_loopback_is_told_apart():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.3.4.5")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("wall.example.com")


# ----- Host: DNS rebinding -----------------------------------------------------------------------------

LOOP = guard.served("127.0.0.1", 8000)


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST:8000",
                                  "[0:0:0:0:0:0:0:1]:8000"])
def test_loopback_answers_to_its_three_names_with_its_port(host):
    assert guard.host_ok(host, LOOP, "127.0.0.1")


@pytest.mark.parametrize("host", ["evil.example:8000", "evil.example", "127.0.0.1:8001", "127.0.0.1", "", None,
                                  "[::1", "::1:8000", "127.0.0.1:8000:1", "127.0.0.1:0", "127.0.0.1:x",
                                  "localhost.:8000", "127.0.0.1:8000/", "é.example:8000", "a b:8000",
                                  "evil;script-src:8000", "user@127.0.0.1:8000"])
def test_any_other_host_is_refused_whatever_address_the_connection_came_to(host):
    assert not guard.host_ok(host, LOOP, "127.0.0.1")


def test_a_wildcard_bind_answers_to_the_address_a_connection_came_to_and_to_the_public_names_only():
    wide = guard.served("0.0.0.0", 8443, ("Wall.Example.com",), tls=True)
    assert guard.host_ok("10.0.0.5:8443", wide, "10.0.0.5")
    assert guard.host_ok("10.0.0.5:8443", wide, "::ffff:10.0.0.5")  # a dual-stack socket's spelling
    assert guard.host_ok("wall.example.com:8443", wide, "10.0.0.5")
    assert guard.host_ok("localhost:8443", wide, "127.0.0.1")  # reached on loopback: its names too
    assert not guard.host_ok("localhost:8443", wide, "10.0.0.5")
    assert not guard.host_ok("10.0.0.6:8443", wide, "10.0.0.5")
    assert not guard.host_ok("evil.example:8443", wide, "10.0.0.5")  # rebound to our address: still refused
    assert guard.host_ok("wall.example.com", guard.served("0.0.0.0", 443, ("wall.example.com",), tls=True), None)


# ----- Origin: cross-site websocket hijacking ----------------------------------------------------------

def test_the_origin_must_be_the_pages_own():
    assert guard.origin_ok("http://127.0.0.1:8000", "127.0.0.1:8000", LOOP)
    assert guard.origin_ok("http://localhost:8000", "localhost:8000", LOOP)
    for origin in ("https://evil.example", "http://evil.example:8000", "null", "", None, "http://localhost:8000",
                   "https://127.0.0.1:8000", "http://127.0.0.1:8001", "http://127.0.0.1", "http://127.0.0.1:8000/x",
                   "http://u@127.0.0.1:8000", "ws://127.0.0.1:8000", "http://[::1:8000"):
        assert not guard.origin_ok(origin, "127.0.0.1:8000", LOOP), origin
    tls = guard.served("wall.example.com", 443, tls=True)
    assert guard.origin_ok("https://wall.example.com", "wall.example.com", tls)
    assert guard.origin_ok("https://wall.example.com:443", "wall.example.com", tls)
    assert not guard.origin_ok("http://wall.example.com", "wall.example.com", tls)


def test_a_websocket_needs_a_matching_origin_and_any_request_a_host_of_ours():
    ws = {"Host": "127.0.0.1:8000", "Upgrade": "websocket"}
    assert guard.refusal(ws, LOOP, "127.0.0.1") is not None  # no Origin: no websocket
    assert guard.refusal({**ws, "Origin": "https://evil.example"}, LOOP, "127.0.0.1") is not None
    assert guard.refusal({**ws, "Origin": "http://127.0.0.1:8000"}, LOOP, "127.0.0.1") is None
    # DNS rebinding: the attacker's page is same-origin with its own name, which now points at us
    rebound = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000", "Upgrade": "websocket"}
    assert guard.refusal(rebound, LOOP, "127.0.0.1") is not None
    page = {"Host": "127.0.0.1:8000"}
    assert guard.refusal(page, LOOP, "127.0.0.1") is None  # a page load, typed in: no Origin
    assert guard.refusal({**page, "Origin": "https://evil.example"}, LOOP, "127.0.0.1") is not None  # a cross-site POST
    assert guard.refusal({"Host": "evil.example:8000"}, LOOP, "127.0.0.1") is not None
    # Referrer-Policy: no-referrer makes a form's POST say `Origin: null`: the login and logout forms only
    null = {"Host": "127.0.0.1:8000", "Origin": "null"}
    assert guard.refusal(null, LOOP, "127.0.0.1", "POST", "/login") is None
    assert guard.refusal(null, LOOP, "127.0.0.1", "GET", "/") is not None
    assert guard.refusal({**null, "Upgrade": "websocket"}, LOOP, "127.0.0.1", "POST", "/login") is not None
    assert guard.refusal({**null, "Host": "evil.example:8000"}, LOOP, "127.0.0.1", "POST", "/login") is not None


# ----- the token and the login cookie -----------------------------------------------------------------

def test_a_non_ascii_token_is_a_wrong_token_not_an_error():
    token = "abcdefghijklmnopqrstuvwxyz012345"
    assert guard.token_matches(token, token)
    assert not guard.token_matches("tökén", token)
    assert not guard.token_matches("\udcff", token)  # an undecodable byte, as aiohttp keeps it
    assert not guard.token_matches("", token)


def test_a_login_cookie_is_signed_expires_and_is_never_the_token():
    secret = b"k" * 32
    value = guard.sign(secret, "abc", 2_000)
    assert guard.verify(secret, value, 1_999.0) == "abc"
    assert guard.verify(secret, value, 2_000.0) is None  # expired
    sid, expiry, mac = value.split(".")
    assert guard.verify(secret, f"{sid}.{int(expiry) + 3600}.{mac}", 1_999.0) is None  # expiry stretched
    assert guard.verify(secret, f"abd.{expiry}.{mac}", 1_999.0) is None  # another login's id
    flipped = mac[:-1] + ("A" if mac[-1] != "A" else "B")
    assert guard.verify(secret, f"{sid}.{expiry}.{flipped}", 1_999.0) is None  # the signature touched
    assert guard.verify(secret, f"{sid}.{expiry}.{mac[:-2]}", 1_999.0) is None
    assert guard.verify(b"x" * 32, value, 1_999.0) is None  # signed by another process
    # "\uff12\uff10\uff10\uff10": fullwidth digits, which int() reads as 2000
    for junk in ("", None, "a.b", "a.b.c.d", "é.2000.x", "abc.-5.x", "abc.\uff12\uff10\uff10\uff10.x", value + "é"):
        assert guard.verify(secret, junk, 1_999.0) is None


def test_logins_are_made_checked_and_revoked():
    logins = guard.Logins(ttl=60)
    cookie = logins.new(1_000.0)
    assert logins.valid(cookie, 1_030.0) and not logins.valid(cookie, 1_061.0)
    assert not guard.Logins(ttl=60).valid(cookie, 1_030.0)  # another process's key: a restart logs out
    other = logins.new(1_000.0)
    logins.revoke(cookie, 1_010.0)
    assert not logins.valid(cookie, 1_020.0) and logins.valid(other, 1_020.0)
    logins.revoke("forged.1.x", 1_010.0)  # nothing to revoke, no error
    assert logins.valid(other, 1_020.0)


def test_failed_logins_are_limited_per_client_and_age_out():
    limit = guard.RateLimit(limit=3, window=60.0, max_clients=2)
    for t in (0.0, 1.0, 2.0):
        assert limit.wait("10.0.0.1", t) == 0.0
        limit.failed("10.0.0.1", t)
    assert limit.wait("10.0.0.1", 3.0) == pytest.approx(57.0)
    assert limit.wait("10.0.0.2", 3.0) == 0.0  # another client is not held up
    assert limit.wait("10.0.0.1", 60.5) == 0.0  # the first failure aged out
    limit.failed("10.0.0.2", 61.0)
    limit.failed("10.0.0.3", 62.0)  # a third client: the quietest one is forgotten, memory stays bounded
    assert len(limit.failures) == 2
    limit.succeeded("10.0.0.3")
    assert "10.0.0.3" not in limit.failures


# ----- what every answer carries, and the pages -----------------------------------------------------------

def test_every_answer_carries_the_security_headers_and_the_policy_names_no_other_origin():
    headers = guard.security_headers("127.0.0.1:8000", False, "/")
    assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer" and headers["Cache-Control"] == "no-store"
    policy = headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self';" in policy and "frame-ancestors 'none'" in policy
    assert re.findall(r"[a-z]+://[^ ;]+", policy) == ["ws://127.0.0.1:8000"]
    assert "unsafe-eval" not in policy and "*" not in policy
    assert "wss://wall:8443" in guard.csp("wall:8443", True)
    assert "Cache-Control" not in guard.security_headers(None, False, "/static/js/textual.js")


def test_the_pages_load_nothing_from_another_origin_and_run_no_inline_script():
    page = terminal_page("gputui", "ws://127.0.0.1:8000/ws", 16, logout=True)
    for html in (page, login_page("127.0.0.1:8000", "<b>x</b>")):
        assert not re.findall(r"(?:src|href)=\"(?:https?:)?//", html)
        assert "googleapis" not in html and "@import" not in html
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html)  # every script is a file of ours
        assert not re.search(r"\son[a-z]+=", html, re.I)  # no inline handler (the policy would block it)
    assert "<b>" not in login_page("127.0.0.1:8000", "<b>x</b>")


# ----- the flags -----------------------------------------------------------------------------------------

def test_serve_refuses_unsafe_flag_combinations_in_one_line():
    assert check(serve_args()) is None
    assert "--tls-cert" in check(serve_args("--host", "0.0.0.0"))
    assert check(serve_args("--host", "0.0.0.0", "--insecure-http")) is None
    assert check(serve_args("--host", "0.0.0.0", "--tls-cert", "c", "--tls-key", "k")) is None
    assert "loopback only" in check(serve_args("--host", "0.0.0.0", "--no-token", "--insecure-http"))
    assert check(serve_args("--no-token")) is None
    assert "go together" in check(serve_args("--tls-cert", "c"))
    assert "--max-pages" in check(serve_args("--max-pages", "0"))
    assert check(serve_args("--public-host", "wall.example.com", "--public-host", "::1")) is None
    assert "without a port" in check(serve_args("--public-host", "wall.example.com:8000"))
    assert "without a port" in check(serve_args("--public-host", "https://wall.example.com"))


def test_bad_tls_files_are_one_line_and_exit_2(tmp_path, capsys):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    settings = Settings(demo=True)
    assert run(settings, serve_args("--tls-cert", str(junk), "--tls-key", str(junk))) == 2
    assert run(settings, serve_args("--tls-cert", str(junk), "--tls-key", str(tmp_path / "none.pem"))) == 2
    assert run(settings, serve_args("--tls-cert", str(tmp_path), "--tls-key", str(junk))) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"gputui: error: cannot serve HTTPS: {junk} must be a PEM certificate (chain) and {junk} its "
                     "PEM private key",
                     f"gputui: error: cannot serve HTTPS: {tmp_path / 'none.pem'}: No such file or directory",
                     f"gputui: error: cannot serve HTTPS: {tmp_path}: Is a directory"]


def test_an_encrypted_key_or_anothers_key_is_one_line_and_never_a_pass_phrase_prompt(tmp_path, capsys):
    import subprocess

    def pair(name: str) -> tuple[str, str]:
        cert, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
        return str(cert), str(key)
    cert, key = pair("a")
    _other_cert, other_key = pair("b")
    locked = str(tmp_path / "locked.key")
    subprocess.run(["openssl", "rsa", "-in", key, "-aes256", "-passout", "pass:secret", "-out", locked], check=True,
                   capture_output=True, timeout=60)
    settings = Settings(demo=True)
    assert run(settings, serve_args("--tls-cert", cert, "--tls-key", other_key)) == 2
    assert run(settings, serve_args("--tls-cert", cert, "--tls-key", locked)) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"gputui: error: cannot serve HTTPS: {other_key} is not the private key of {cert}",
        f"gputui: error: cannot serve HTTPS: {locked} is encrypted: give the key without a pass phrase"]


# ----- the page's gputui stays on its context -------------------------------------------------------------

def _app(pinned: bool, contexts: tuple[str, ...] = ()):
    notes: list[str] = []
    app = SimpleNamespace(settings=Settings(context="prod-eu", pin_context=pinned, contexts=contexts),
                          backend=SimpleNamespace(context="prod-eu", simulated=False), fleet=None,
                          notify=lambda message, **kw: notes.append(message),
                          run_worker=lambda *a, **kw: notes.append("connecting"),
                          push_screen=lambda *a, **kw: notes.append("fleet screen"))
    return app, notes


def test_a_pinned_gputui_refuses_ctx_and_fleet_in_one_line():
    from gputui.ui.app_clusters import open_fleet, switch_context

    app, notes = _app(pinned=True)
    switch_context(app, "prod-us")
    assert notes == ["this page is pinned to prod-eu: no switch to prod-us"]
    notes.clear()
    open_fleet(app)  # the kubeconfig's contexts are not the page's to read
    assert notes == ["this page is pinned to prod-eu: no fleet view"]
    app, notes = _app(pinned=True, contexts=("prod-eu", "prod-us"))  # served with --context prod-eu,prod-us
    switch_context(app, "prod-us")  # its fleet's rows show, but the page stays on prod-eu
    assert notes == ["this page is pinned to prod-eu: no switch to prod-us"]
    app, notes = _app(pinned=False)
    switch_context(app, "prod-us")
    assert notes[-1] == "connecting"  # unpinned, as before


def test_pin_context_is_a_hidden_flag_of_the_page_gputui():
    assert settings_from(build_parser().parse_args(["--demo", "--pin-context"])).pin_context
    assert not settings_from(build_parser().parse_args(["--demo"])).pin_context
    assert "--pin-context" not in build_parser().format_help()


def test_the_old_max_sessions_flag_still_sets_the_page_cap(capsys):
    """`--max-pages` was `--max-sessions` (renamed: a session in gputui is an inference session); a script
    that still says the old name gets the same cap, and the help shows only the new one."""
    assert serve_args("--max-sessions", "3").max_pages == 3 == serve_args("--max-pages", "3").max_pages
    assert serve_args().max_pages == 4
    with pytest.raises(SystemExit):
        serve_args("--help")
    shown = capsys.readouterr().out
    assert "--max-pages N" in shown and "--max-sessions" not in shown
