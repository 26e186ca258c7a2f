"""A proxy in front of the real kube-apiserver that answers chosen requests itself: a status (500, 503, 401, ...)
or no answer at all (the connection held open, silent). Everything else goes through to the apiserver
unchanged, watches streamed, so gputui reads the real cluster while one kind of request fails as the test says.

gputui talks to it in plain HTTP (a kubeconfig `server: http://127.0.0.1:PORT`, written by `kubeconfig`); the
proxy speaks HTTPS to the apiserver, verifying its CA. The bearer token gputui sends is passed through, so the
apiserver's RBAC and audit log see gputui's own identity. Two gputuis of one identity are told apart in that log
by giving each its own proxy with a `user_agent` (the audit event's `userAgent`). A rule may block (a barrier
lines up two processes' requests); `passed` lists what went through, with the apiserver's status.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import urllib3
import yaml

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
              "proxy-authenticate", "content-length", "host"}


@dataclass(frozen=True)
class Answer:
    """What the proxy says instead of the apiserver: a status with a Kubernetes Status body, or silence."""

    status: int = 503
    message: str = "injected by the test's proxy"
    hang: bool = False  # accept the request and never answer (until the proxy closes)


Rule = Callable[[str, str], "Answer | None"]  # (method, path) -> the proxy's own answer, or None: pass it on


def on(method: str, path_part: str, answer: Answer) -> Rule:
    """Answer `answer` to every `method` request whose path contains `path_part`."""
    return lambda m, p: answer if m == method and path_part in p else None


def at(method: str, path: str, answer: Answer) -> Rule:
    """Answer `answer` to `method` requests of exactly `path` (its query aside)."""
    return lambda m, p: answer if m == method and p == path else None


class FaultProxy:
    def __init__(self, upstream: str, ca_file: Path, rule: Rule, *, user_agent: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.rule = rule
        self.user_agent = user_agent  # sent instead of the client's own, when given
        self.pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(ca_file), maxsize=32)
        self.answered: list[tuple[str, str, int]] = []  # (method, path, status) the proxy answered itself
        self.passed: list[tuple[str, str, int]] = []  # (method, path, the apiserver's status) passed on
        self._closing = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def _any(self) -> None:
                proxy.handle(self)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any  # noqa: N815 - http.server's handler names

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()  # silent handlers end, their connections close
        self.server.shutdown()
        self.server.server_close()
        self.pool.clear()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        path = h.path.split("?", 1)[0]
        answer = self.rule(h.command, path)
        if answer is not None:
            self.answered.append((h.command, path, 0 if answer.hang else answer.status))
            if answer.hang:
                self._closing.wait()
                h.close_connection = True
                return
            data = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": answer.message,
                               "code": answer.status}).encode()
            h.send_response(answer.status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return
        headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_BY_HOP}
        if self.user_agent is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "user-agent"}
            headers["User-Agent"] = self.user_agent
        resp = self.pool.request(h.command, self.upstream + h.path, body=body, headers=headers, retries=False,
                                 preload_content=False, timeout=urllib3.Timeout(connect=5, read=None))
        self.passed.append((h.command, path, resp.status))
        try:
            h.send_response(resp.status)
            for k, v in resp.headers.items():
                if k.lower() not in HOP_BY_HOP:
                    h.send_header(k, v)
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for chunk in resp.stream(64 * 1024, decode_content=False):  # a watch: each event as it comes
                if chunk:
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True
        finally:
            resp.release_conn()


def kubeconfig(path: Path, server: str, token: str, context: str = "proxied") -> Path:
    """A kubeconfig reaching `server` (the proxy, plain HTTP) with `token`."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
    }))
    path.chmod(0o600)
    return path
