"""A watch reads a busy stream's events in batches (kube_http.Connection.stream, WATCH_BATCH_S), and a quiet one at
once: after a read that had to wait for its data, the watch waits WATCH_BATCH_S more so the events that come
meanwhile are read in one go; a read that found data waiting does not wait.

Against a real HTTP server on 127.0.0.1 sending a watch's newline-delimited JSON in chunks, timed by the test.
Mutations it kills: the sleep removed, the wait test (`> 0.001`) inverted or made always true."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
import urllib3

from gputui.backends import base
from gputui.backends.kube_http import Connection

BATCH_S = 0.4


def _serve(plan: list[tuple[float, int]]):
    """A server whose one watch sends event `n` after sleeping `pause` seconds, for each (pause, n) of plan;
    records when each was sent."""
    sent: dict[int, float] = {}

    class Watch(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for pause, n in plan:
                time.sleep(pause)
                line = (json.dumps({"type": "MODIFIED", "object": {"n": n}}) + "\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                sent[n] = time.monotonic()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Watch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, sent


def _watch(server) -> dict[int, float]:
    conn = Connection(host=f"http://127.0.0.1:{server.server_address[1]}", context="t", user="u", namespace=None,
                      pool=urllib3.PoolManager(), configuration=SimpleNamespace(auth_settings=dict))
    read: dict[int, float] = {}
    for event in conn.stream("/api/v1/nodes", {"watch": "true"}, timeout=10):
        read[event["object"]["n"]] = time.monotonic()
    return read


@pytest.fixture(autouse=True)
def _batch(monkeypatch):
    monkeypatch.setattr(base, "WATCH_BATCH_S", BATCH_S)


def test_events_arriving_while_the_watch_waits_are_read_together_after_the_batch_pause():
    # Event 1 comes after a pause (the read waits for it); 2, 3 and 4 come 50 ms apart while the watch waits.
    server, sent = _serve([(0.2, 1), (0.05, 2), (0.05, 3), (0.05, 4)])
    try:
        read = _watch(server)
    finally:
        server.shutdown()
    assert sorted(read) == [1, 2, 3, 4]
    assert read[1] - sent[1] < BATCH_S / 2  # the first event is not held back: nothing was waiting before it
    # The others were read in one go, after the pause that followed the read that waited: not as each came.
    assert read[2] - read[1] >= BATCH_S * 0.9
    # Found waiting, 3 and 4 are read at once after 2: a pause after a read that did not wait would be 2 more.
    assert max(read[2], read[3], read[4]) - min(read[2], read[3], read[4]) < BATCH_S / 4

