"""What the drain benchmarks share: the real harness with live traffic, gputui and kubectl run as an operator
runs them, and an independent reading of which pods are out of rotation and whether a drain owns them.

The harness: kube-apiserver, controller-manager (its EndpointSlice controller routes the traffic) and scheduler
(tests.support.control_plane), the fake kubelet (pods Ready, terminating pods not Ready, killed at their grace
period), the inference exporter scraped by Debian's Prometheus, and tests.support.traffic's generator, which
routes sessions by the real EndpointSlices and counts a session cut when its pod is gone before it ends.

Out of rotation, read from the API alone (never by asking gputui): a pod its workload still selects (its
`app` label) that lacks the serving label its Service selects on. A drain owns it while the node's drain
record (`gputui.io/drain-rotation`) names it under its UID and the node's lease (`gputui.io/drain-lease`) was
renewed less than LEASE_S ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402

from gputui.ops.drain.lease import LEASE, LEASE_S  # noqa: E402
from gputui.ops.drain.out_of_rotation import RECORD  # noqa: E402
from tests.support.control_plane import ControlPlane  # noqa: E402
from tests.support.exporters import InferenceExporter  # noqa: E402
from tests.support.fake_kubelet import FakeKubelet  # noqa: E402
from tests.support.prom import PrometheusServer, inference_scrape_config  # noqa: E402
from tests.support.traffic import Durations, TrafficGenerator  # noqa: E402
from tests.support.workloads import SERVING_LABEL  # noqa: E402

T = TypeVar("T")
OWNER_KEY = "app"  # the label every benchmark workload's selector has (served_deployment)


class Harness:
    """The servers, started once per benchmark run; every process gputui starts reads this repository's code."""

    def __init__(self, stack: ExitStack, workdir: Path, *, scrape_interval_s: int = 1) -> None:
        self.cp = stack.enter_context(ControlPlane())
        self.kubelet = FakeKubelet(self.cp.kubeconfigs["kubelet"], heartbeat_interval=10).start()
        stack.callback(self.kubelet.stop)
        if not self.kubelet.synced.wait(30):
            raise SystemExit(f"fake kubelet never synced: {self.kubelet.errors}")
        self.exporter = InferenceExporter(workdir / "targets.json")
        stack.callback(self.exporter.close)
        self.scrape_interval_s = scrape_interval_s
        self.prom = PrometheusServer([inference_scrape_config(self.exporter.sd_file)],
                                     scrape_interval=f"{scrape_interval_s}s")
        self.exporter.add_pod("harness", "warm-up", running=0)  # Prometheus is ready once a target is up
        self.prom.start()
        stack.callback(self.prom.close)
        api = self.cp.harness_client()
        # The API objects as Any: the client's generated models type every field Optional.
        self.core: Any = client.CoreV1Api(api)
        self.apps: Any = client.AppsV1Api(api)
        self.policy: Any = client.PolicyV1Api(api)
        self.home = workdir / "home"
        self.kubectl_bin = self.cp.bin_dir / "kubectl"
        # How the operator puts pods left out of rotation back: "u", the board's uncordon; "kubectl", `kubectl
        # uncordon` (which knows nothing of gputui's record: a control that the judgement can fail).
        self.remedy = "u"

    def env(self) -> dict[str, str]:
        """An operator's environment: a home of its own, no KUBECONFIG of this machine, this repository's gputui."""
        env = dict(os.environ, HOME=str(self.home), XDG_STATE_HOME=str(self.home / "s"),
                   XDG_CONFIG_HOME=str(self.home / "c"), PYTHONPATH=str(REPO))
        env.pop("KUBECONFIG", None)
        return env

    def common(self) -> list[str]:
        return ["--kubeconfig", str(self.cp.admin_kubeconfig), "--prometheus", self.prom.url]

    def gputui(self, command: str, *args: str) -> subprocess.Popen:
        """`gputui COMMAND ARGS…` running, its output (stdout and stderr) read as lines."""
        if command == "drain":  # a quiet count after a pod leaves rotation: trusted after two of this store's scrapes
            args = ("--rotation-settle", f"{2 * self.scrape_interval_s}s", *args)
        return subprocess.Popen([sys.executable, "-u", "-m", "gputui", command, *self.common(), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env(), cwd=REPO)

    def gputui_run(self, command: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gputui", command, *self.common(), *args], capture_output=True,
                              text=True, env=self.env(), cwd=REPO, timeout=timeout)

    def kubectl(self, *args: str) -> subprocess.Popen:
        """The built kubectl (scripts/build-control-plane.sh) as the admin, running."""
        env = dict(os.environ, KUBECONFIG=str(self.cp.admin_kubeconfig))
        return subprocess.Popen([str(self.kubectl_bin), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)

    def kubectl_run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = dict(os.environ, KUBECONFIG=str(self.cp.admin_kubeconfig))
        return subprocess.run([str(self.kubectl_bin), *args], capture_output=True, text=True, env=env, timeout=timeout)

    def traffic(self, seed: int, durations: Durations) -> TrafficGenerator:
        return TrafficGenerator(self.cp.kubeconfigs["harness"], self.exporter, seed=seed, durations=durations)

    def uncordon_as_u(self, node: str) -> subprocess.CompletedProcess:
        """What the board's `U` does (gputui.ui.screens.cordon_dialog: plan_cordon on a fresh snapshot, then run_cordon
        with the app's context: its writer and audit log), in a process of its own: gputui has no `uncordon` command."""
        return subprocess.run([sys.executable, "-c", UNCORDON_AS_U, str(self.cp.admin_kubeconfig), self.prom.url,
                               node], capture_output=True, text=True, env=self.env(), cwd=REPO, timeout=120)


UNCORDON_AS_U = """import sys
from gputui.backends.kube_backend import live_backend
from gputui.ops.context import OpContext
from gputui.ops.cordon import plan_cordon, run_cordon
from gputui.settings import Settings
settings = Settings(kubeconfig=sys.argv[1], prometheus=sys.argv[2])
backend = live_backend(settings)
try:
    plan = plan_cordon(backend.reader.snapshot(), sys.argv[3], False)
    print(plan.describe())
    print(run_cordon(plan, OpContext.of(backend, settings)))
finally:
    backend.close()
"""


class Output:
    """A process's lines, with the time of the last one, read in a thread."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.last_at = proc, time.monotonic()
        self.lines: list[str] = []
        self.started = time.time()
        self.ended: float | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line.rstrip())
            self.last_at = time.monotonic()
        self.proc.wait()
        self.ended = time.time()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def wait(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.25) -> T:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(interval)
    raise RuntimeError(f"{what} not reached in {timeout}s")


# --- out of rotation, read from the API alone -----------------------------------------------------------

@dataclass(frozen=True)
class OutPod:
    key: str  # namespace/name
    uid: str
    node: str
    owned: bool  # named by its node's drain record, whose lease is live
    why: str  # when not owned: in words


def _running(p: Any) -> bool:
    return p.status.phase == "Running" and not p.metadata.deletion_timestamp


def lease_renewed(annotations: dict[str, str]) -> float | None:
    """When the node's drain lease was last renewed (None: no lease; 0.0: unreadable)."""
    raw = annotations.get(LEASE)
    if not raw:
        return None
    try:
        return float(json.loads(raw)["renewed"])
    except (ValueError, KeyError, TypeError):
        return 0.0


def record_uids(annotations: dict[str, str]) -> dict[str, str]:
    """The pods the node's drain record names: namespace/name -> uid ({} when none or unreadable)."""
    try:
        data = json.loads(annotations.get(RECORD) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v.get("uid", "")) for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def out_of_rotation(core: Any, namespaces: list[str], now: float | None = None) -> list[OutPod]:
    """Every running pod of these namespaces that its workload selects but its Service does not (no serving
    label), with whether a drain owns it. Two reads (pods, then nodes) can straddle a drain's write: see
    left_out for the judgement that allows for it."""
    pods: list[Any] = [p for ns in namespaces for p in core.list_namespaced_pod(ns).items]
    out = [p for p in pods if _running(p) and OWNER_KEY in (p.metadata.labels or {})
           and (p.metadata.labels or {}).get(SERVING_LABEL[0]) != SERVING_LABEL[1]]
    if not out:
        return []
    nodes: dict[str, dict[str, str]] = {n.metadata.name: n.metadata.annotations or {} for n in core.list_node().items}
    now = time.time() if now is None else now
    found = []
    for p in out:
        key, node = f"{p.metadata.namespace}/{p.metadata.name}", p.spec.node_name or ""
        annotations = nodes.get(node, {})
        renewed = lease_renewed(annotations)
        named = record_uids(annotations).get(key) == p.metadata.uid
        if not named:
            why = f"not named by {node}'s drain record"
        elif renewed is None:
            why = f"{node} has no drain lease"
        elif now - renewed >= LEASE_S:
            why = f"{node}'s drain lease expired {now - renewed - LEASE_S:.0f}s ago"
        else:
            why = ""
        found.append(OutPod(key, p.metadata.uid, node, not why, why))
    return found


def left_out(core: Any, namespaces: list[str], settle_s: float = 1.5) -> list[OutPod]:
    """Pods out of rotation that no drain owns, in two reads settle_s apart: a drain's record and label
    writes are two requests, and one read of pods and nodes can fall between them (a pod put back, its
    name dropped a moment later). Only a pod unowned, under the same UID, in both reads is left out."""
    first = {p.uid: p for p in out_of_rotation(core, namespaces) if not p.owned}
    if not first:
        return []
    time.sleep(settle_s)
    return [p for p in out_of_rotation(core, namespaces) if not p.owned and p.uid in first]
