"""Node status reports at a kubelet's pace, for the benchmarks' fleets of nodes no kubelet runs.

A kubelet with node leases posts its node's status every nodeStatusReportFrequency (5 minutes by default)
when nothing changed: a cluster of N nodes sends N/300 Node updates a second, and every watcher of nodes
(gputui's list-watch cache among them) receives each one. At 5,000 nodes that is about 17 a second, at
65,000 about 217. The harness's nodes had none; their only updates came from the TTL controller annotating
every node once, at the controller-manager's 20 requests a second (4 minutes of updates at 5,000 nodes,
54 at 65,000), so a steady window measured during that storm and one measured after it differed. build_fleet
now turns the TTL controller off and runs this instead, for the whole of a run.

A real node's status is larger (its images, addresses, daemon endpoints): these updates cost a watcher less
than real ones do.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence

PATCH = "application/strategic-merge-patch+json"  # conditions merge by type, as the kubelet's patch does


class NodeReports:
    def __init__(self, api_url: str, token: str, ca_file: str, names: Sequence[str], every_s: float = 300.0,
                 threads: int = 4) -> None:
        self.api_url, self.token, self.ca_file = api_url, token, ca_file
        self.names, self.every_s = list(names), every_s
        self.sent = 0
        self.failed = 0
        self._count = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i, threads), name=f"node reports {i}", daemon=True)
                         for i in range(threads)] if names and every_s > 0 else []

    def start(self) -> NodeReports:
        for t in self._threads:
            t.start()
        return self

    def rate(self) -> float:
        """Updates a second asked for (the whole fleet)."""
        return len(self.names) / self.every_s if self._threads else 0.0

    def _run(self, first: int, step: int) -> None:
        import requests

        session = requests.Session()
        session.trust_env = False
        session.verify = self.ca_file
        session.headers.update({"Authorization": f"Bearer {self.token}", "Content-Type": PATCH})
        mine = self.names[first::step]
        gap = self.every_s / len(mine) if mine else 1.0  # each node once per every_s, spread evenly
        due = time.monotonic() + gap * (first / step)
        i = 0
        while not self._stop.is_set():
            wait = due - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                break
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            # Only the heartbeat moves, as in a kubelet's report when nothing changed (the condition as scale.py
            # created it, no message): a report that changed more would be a node that changed.
            body = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                               "lastHeartbeatTime": now}]}}
            try:
                r = session.patch(f"{self.api_url}/api/v1/nodes/{mine[i % len(mine)]}/status", data=json.dumps(body),
                                  timeout=30)
                ok = r.status_code == 200
            except requests.RequestException:
                ok = False
            with self._count:
                self.sent += ok
                self.failed += not ok
            i += 1
            due += gap  # a slow apiserver is caught up with, not fallen behind for good
        session.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=35)
