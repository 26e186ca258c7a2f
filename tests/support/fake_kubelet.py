"""A fake kubelet for GPU nodes (the behaviour kwok gives), for a real apiserver.

It owns a configurable set of Node objects and, through watches:

* creates each node with GPU Feature Discovery / GPU Operator labels and
  ``nvidia.com/gpu`` capacity and allocatable, plus cpu, memory and pods;
* keeps the nodes Ready: status heartbeats and a Lease in ``kube-node-lease``
  renewed every ``heartbeat_interval`` seconds;
* moves pods bound to its nodes to Running and Ready (podIP, hostIP,
  containerStatuses, conditions, startTime);
* starts a pod slowly or never makes it Ready, when the pod (or the test) asks:
  annotation ``gputui.test/start-delay-seconds: "N"`` (or
  :meth:`FakeKubelet.set_start_delay` for a whole namespace) keeps it Running
  but not Ready for N seconds, as an engine loading its weights;
  ``gputui.test/never-ready: "true"`` keeps it not Ready for good;
* terminates pods as the kubelet does once a pod has a ``deletionTimestamp``:
  it marks the pod not Ready at once (Ready and ContainersReady False), so the
  EndpointSlice controller marks its endpoints ``ready: false,
  serving: false, terminating: true``; it runs the preStop hook if that is a
  sleep (``lifecycle.preStop.sleep.seconds``, or an exec ``sleep N`` /
  ``sh -c "sleep N"``), bounded by the grace period, then "sends SIGTERM";
  the pod is finalised (deleted with grace 0) when its containers have
  stopped:

  - ``gputui.test/shutdown-seconds: "N"`` on the pod: the engine exits N s
    after SIGTERM (so after preStop + N), or is killed at the grace period;
  - without it the containers ignore SIGTERM and are killed at the grace
    period (``deletionGracePeriodSeconds``), as before; with a preStop hook
    that used up the grace period the kubelet's one-off 2 s extension
    applies (its ``minimumGracePeriodInSeconds``).

* runs a pod to completion when its container's image was given an output (:meth:`FakeKubelet.set_run_output`,
  e.g. the DCGM diagnostic's image and a ``dcgmi diag -j`` sample): the pod goes Succeeded (exit code 0) or
  Failed (any other), and its log is that output, served as the kubelet serves it
  (``GET /containerLogs/NS/POD/CONTAINER`` over HTTPS) so that the apiserver's ``pods/log`` proxy reads it.
  Such a node advertises 127.0.0.1 and the log server's port as its kubelet endpoint (the apiserver dials the
  node's first address: it is given no Hostname address); its kubelet certificate is self-signed, which the
  apiserver accepts as it runs without ``--kubelet-certificate-authority``. A pod that ended is removed at once
  when deleted (grace 0), as the kubelet does.

Everything runs in daemon threads using its own kubeconfig (give it a user of
its own so the audit log can tell its traffic from the app's). It survives
apiserver restarts: watches re-list and heartbeats retry.
"""

from __future__ import annotations

import hashlib
import heapq
import http.server
import itertools
import json
import logging
import queue
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("gputui.tests.fake_kubelet")

GPU_RESOURCE = "nvidia.com/gpu"
#: The taint GPU pools usually carry; pods need a toleration for it.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}

#: Pod annotations a test sets to shape what the fake kubelet does with that pod (values are strings).
START_DELAY_ANNOTATION = "gputui.test/start-delay-seconds"
NEVER_READY_ANNOTATION = "gputui.test/never-ready"
SHUTDOWN_ANNOTATION = "gputui.test/shutdown-seconds"
#: The kubelet's minimumGracePeriodInSeconds: the least a container gets after its preStop hook.
MIN_GRACE_AFTER_HOOK = 2.0

DEFAULT_PRODUCT = "NVIDIA-H100-80GB-HBM3"
DEFAULT_DRIVER = "550.54.15"
DEFAULT_MEMORY_MIB = 81559


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(s: str) -> float:
    return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z").timestamp()


def prestop_sleep_seconds(spec: dict[str, Any]) -> float | None:
    """The longest preStop sleep among the pod's containers (they stop in parallel), or None when no
    container has one this fake can run: ``lifecycle.preStop.sleep.seconds`` (the kubelet's own sleep
    action) or an exec hook that is only ``sleep N`` (``["sleep", "N"]``, ``["/bin/sh", "-c", "sleep N"]``)."""
    found: list[float] = []
    for c in spec.get("containers") or []:
        hook = ((c.get("lifecycle") or {}).get("preStop")) or {}
        seconds: float | None = None
        if isinstance(hook.get("sleep"), dict):
            seconds = _number(hook["sleep"].get("seconds"))
        elif isinstance(hook.get("exec"), dict):
            seconds = _exec_sleep(hook["exec"].get("command") or [])
        if seconds is not None and seconds >= 0:
            found.append(seconds)
    return max(found) if found else None


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _exec_sleep(command: list[str]) -> float | None:
    if len(command) == 2 and command[0].rsplit("/", 1)[-1] == "sleep":
        return _number(command[1])
    if len(command) == 3 and command[0].rsplit("/", 1)[-1] in ("sh", "bash", "ash", "dash") and command[1] == "-c":
        words = command[2].strip().rstrip(";").split()
        if len(words) == 2 and words[0] == "sleep":
            return _number(words[1])
    return None


def gpu_node_labels(name: str, gpus: int, product: str, driver: str, memory_mib: int) -> dict[str, str]:
    """The labels GPU Feature Discovery and the GPU Operator put on a node."""
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    if gpus <= 0:
        return labels
    major, _, rest = driver.partition(".")
    minor, _, revision = rest.partition(".")
    labels.update({
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product.replace(" ", "-"),
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.family": "hopper" if "H100" in product or "H200" in product else "ampere",
        "nvidia.com/gpu.machine": "fake-gpu-machine",
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": revision or "0",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
    })
    return labels


@dataclass
class FakeNode:
    name: str
    index: int
    gpus: int
    product: str
    driver: str
    memory_mib: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    ip: str
    conditions: dict[str, dict[str, str]] = field(default_factory=dict)
    uid: str | None = None
    heartbeats: bool = True
    pod_ips: itertools.count = field(default_factory=lambda: itertools.count(2))
    node_info: dict[str, str] = field(default_factory=dict)  # overrides of status.nodeInfo (kernel, runtime...)
    ip_by_pod: dict[str, str] = field(default_factory=dict)  # pod UID -> the IP it was given
    kubelet_port: int = 10250  # the log server's port when this node serves logs (serve_logs)
    serves_logs: bool = False

    def pod_ip(self, uid: str) -> str:
        """The pod's IP, the same every time it is asked: a pod seen twice before its first status patch shows
        (a re-list, an event in between) would otherwise get a second IP, which the apiserver refuses (422)."""
        ip = self.ip_by_pod.get(uid)
        if ip is None:
            ip = self.ip_by_pod.setdefault(uid, f"10.244.{self.index}.{next(self.pod_ips) % 254 + 1}")
        return ip

    def status(self, heartbeat: str) -> dict[str, Any]:
        conds = []
        for c in self.conditions.values():
            c = dict(c)
            c["lastHeartbeatTime"] = heartbeat
            conds.append(c)
        return {
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": self.ip}]
            + ([] if self.serves_logs else [{"type": "Hostname", "address": self.name}]),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "nodeInfo": {
                "machineID": hashlib.md5(self.name.encode()).hexdigest(),
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, self.name)),
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_URL, self.name)),
                "kernelVersion": "6.8.0-fake",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.20",
                "kubeletVersion": _kubelet_version(),
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
                **self.node_info,
            },
        }


def _kubelet_version() -> str:
    from tests.support.control_plane import K8S_VERSION

    return K8S_VERSION


def _condition(ctype: str, status: str, reason: str, message: str) -> dict[str, str]:
    now = _now()
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now}


def _healthy_conditions() -> dict[str, dict[str, str]]:
    return {
        "MemoryPressure": _condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                                     "kubelet has sufficient memory available"),
        "DiskPressure": _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        "PIDPressure": _condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        "Ready": _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    }


class FakeKubelet:
    """Fake kubelet for any number of GPU nodes. Use :meth:`start`/:meth:`stop`."""

    def __init__(self, kubeconfig: Path | str, *, heartbeat_interval: float = 10.0, lease_duration: int = 40,
                 pod_start_delay: float = 0.0):
        self.kubeconfig = str(kubeconfig)
        self.heartbeat_interval = heartbeat_interval
        self.lease_duration = lease_duration
        self.pod_start_delay = pod_start_delay
        self._nodes: dict[str, FakeNode] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._work: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._timers: list[tuple[float, int, str, Any]] = []
        self._seq = itertools.count()
        self._node_index = itertools.count(1)
        self._watch_resp: Any = None
        self._pinned_ready: dict[str, bool] = {}  # pod uid -> readiness forced by a test
        self._start_delays: dict[str, float] = {}  # namespace -> start delay (set_start_delay)
        self._ready_at: dict[str, float] = {}  # pod uid -> when a slow start becomes Ready (epoch s)
        self._ready_timer: set[str] = set()  # pod uids with a readiness timer pending
        self._deleting_since: dict[str, float] = {}  # pod uid -> when its deletion was requested (epoch s)
        self._finalize_due: dict[str, float] = {}  # pod uid -> when it is finalised
        self._marked_terminating: set[str] = set()  # pod uids already marked not Ready for termination
        self._apis = threading.local()
        self.errors: list[str] = []  # unexpected API errors, for diagnostics
        self.pods_started = 0
        self.pods_finalized = 0
        self.synced = threading.Event()  # first pod list done
        self._run_outputs: dict[str, tuple[str, int]] = {}  # image -> (its log, its exit code): runs to completion
        self._logs: dict[tuple[str, str, str], str] = {}  # (namespace, pod, container) -> its log
        self._log_server: http.server.ThreadingHTTPServer | None = None

    # --- API clients, one per thread ---------------------------------------
    def _core(self) -> k8s.CoreV1Api:
        api = getattr(self._apis, "core", None)
        if api is None:
            api_client = k8s_config.new_client_from_config(config_file=self.kubeconfig)
            api = self._apis.core = k8s.CoreV1Api(api_client)
            self._apis.coord = k8s.CoordinationV1Api(api_client)
        return api

    def _coord(self) -> k8s.CoordinationV1Api:
        self._core()
        return self._apis.coord

    # --- lifecycle ----------------------------------------------------------
    def start(self) -> FakeKubelet:
        for target, name in ((self._pod_watch_loop, "pods"), (self._worker_loop, "worker"),
                             (self._heartbeat_loop, "heartbeat")):
            t = threading.Thread(target=target, name=f"fake-kubelet-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, delete_nodes: bool = False) -> None:
        self._stop.set()
        self._work.put(("wake", None))
        resp = self._watch_resp
        if resp is not None:
            with suppress(Exception):
                resp.shutdown()
        for t in self._threads:
            t.join(timeout=10)
        if self._log_server is not None:
            self._log_server.shutdown()
        if delete_nodes:
            for name in list(self._nodes):
                self.remove_node(name)

    # --- nodes ----------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        with self._lock:
            return list(self._nodes)

    def add_node(
        self,
        name: str,
        gpus: int = 8,
        product: str = DEFAULT_PRODUCT,
        driver: str = DEFAULT_DRIVER,
        memory_mib: int = DEFAULT_MEMORY_MIB,
        *,
        cpu: str = "96",
        memory: str = "1536Gi",
        pods: int = 110,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        gpu_taint: bool = False,
        allocatable_gpus: int | None = None,
        extra_resources: dict[str, str] | None = None,
        ready: bool = True,
        node_info: dict[str, str] | None = None,
        serve_logs: bool = False,
    ) -> dict[str, Any]:
        """Create (or adopt) a GPU node and keep it alive. Returns the Node as a dict.

        ``gpus=0`` makes a plain CPU node. ``gpu_taint=True`` adds the usual
        ``nvidia.com/gpu:NoSchedule`` taint (pods then need
        :data:`GPU_TOLERATION`). ``serve_logs=True``: the apiserver can read its pods' logs (see the module
        docstring; the node's address is then 127.0.0.1).
        """
        index = next(self._node_index)
        all_labels = gpu_node_labels(name, gpus, product, driver, memory_mib)
        all_labels.update(labels or {})
        all_taints = list(taints or [])
        if gpu_taint:
            all_taints.append(dict(GPU_TAINT))
        capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "1Ti"}
        if gpus > 0:
            capacity[GPU_RESOURCE] = str(gpus)
        capacity.update(extra_resources or {})
        allocatable = dict(capacity)
        if gpus > 0 and allocatable_gpus is not None:
            allocatable[GPU_RESOURCE] = str(allocatable_gpus)
        node = FakeNode(
            name=name, index=index, gpus=gpus, product=product, driver=driver, memory_mib=memory_mib,
            labels=all_labels, taints=all_taints, capacity=capacity, allocatable=allocatable,
            ip=f"10.10.{index // 250}.{index % 250 + 1}", conditions=_healthy_conditions(),
            node_info=dict(node_info or {}),
        )
        if serve_logs:
            node.ip, node.serves_logs, node.kubelet_port = "127.0.0.1", True, self._start_log_server()
        if not ready:
            node.conditions["Ready"] = _condition("Ready", "False", "KubeletNotReady", "fake kubelet: not ready")
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": all_labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "gputui.test/fake-kubelet": "true"}},
            "spec": {"taints": all_taints, "podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]},
        }
        core = self._core()
        try:
            created = json.loads(core.create_node(body, _preload_content=False).data)
        except ApiException as exc:
            if exc.status != 409:
                raise
            created = json.loads(core.read_node(name, _preload_content=False).data)
        node.uid = created["metadata"]["uid"]
        with self._lock:
            self._nodes[name] = node
        self._post_status(node)
        self._sync_condition_taints(node)
        self._renew_lease(node)
        # Pods may already be bound to a node of that name (adopted node).
        self._work.put(("resync", None))
        return json.loads(core.read_node(name, _preload_content=False).data)

    def remove_node(self, name: str, *, delete: bool = True) -> None:
        """Stop serving ``name``; delete the Node object too unless ``delete=False``."""
        with self._lock:
            node = self._nodes.pop(name, None)
        if node is None or not delete:
            return
        try:
            self._core().delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def node(self, name: str) -> FakeNode:
        with self._lock:
            return self._nodes[name]

    def set_ready(self, name: str, ready: bool, *, reason: str | None = None, message: str = "") -> None:
        """Flip the node's Ready condition (heartbeats keep reporting that state)."""
        status = "True" if ready else "False"
        self.set_condition(name, "Ready", status, reason or ("KubeletReady" if ready else "KubeletNotReady"),
                           message or ("kubelet is posting ready status" if ready else "fake kubelet: not ready"))

    def set_condition(self, name: str, ctype: str, status: str, reason: str = "", message: str = "") -> None:
        """Set any node condition, e.g. ``GpuThermalWatch``/``True`` from a health agent."""
        with self._lock:
            node = self._nodes[name]
            old = node.conditions.get(ctype)
            cond = _condition(ctype, status, reason or ctype, message)
            if old is not None and old["status"] == status:
                cond["lastTransitionTime"] = old["lastTransitionTime"]
            node.conditions[ctype] = cond
        self._post_status(node)
        if ctype == "Ready":
            self._sync_condition_taints(node)

    def set_allocatable(self, name: str, resource: str, value: str) -> None:
        """E.g. lower ``nvidia.com/gpu`` allocatable as the device plugin does after an XID."""
        with self._lock:
            node = self._nodes[name]
            node.allocatable[resource] = value
        self._post_status(node)

    def pause_heartbeats(self, name: str, paused: bool = True) -> None:
        """Stop (or resume) status heartbeats and lease renewal for ``name``."""
        with self._lock:
            self._nodes[name].heartbeats = not paused

    def heartbeat(self, name: str | None = None) -> None:
        """Post status and renew the Lease now (for ``name`` or every node)."""
        with self._lock:
            nodes = [self._nodes[name]] if name else list(self._nodes.values())
        for node in nodes:
            self._post_status(node)
            self._renew_lease(node)

    def set_start_delay(self, namespace: str, seconds: float) -> None:
        """Pods of ``namespace`` started from now on stay not Ready for ``seconds`` after they start Running
        (their own ``gputui.test/start-delay-seconds`` annotation wins); 0 clears it. Per test: the fixture
        is shared, so a test sets it on its own namespace."""
        with self._lock:
            if seconds > 0:
                self._start_delays[namespace] = float(seconds)
            else:
                self._start_delays.pop(namespace, None)

    def set_run_output(self, image: str, output: str, exit_code: int = 0) -> None:
        """Pods whose container runs `image` (on this kubelet's nodes) run to completion: this output is their
        log, and `exit_code` their end (0: Succeeded; else Failed)."""
        with self._lock:
            self._run_outputs[image] = (output, exit_code)

    def _start_log_server(self) -> int:
        """The kubelet's log endpoint over HTTPS with a self-signed certificate; started once, its port returned."""
        with self._lock:
            if self._log_server is None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                # The files are needed only until the context has read them: none is left behind in /tmp.
                with tempfile.TemporaryDirectory(prefix="fake-kubelet-tls-") as tmp:
                    cert, key = Path(tmp) / "kubelet.crt", Path(tmp) / "kubelet.key"
                    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                                    "-out", str(cert), "-days", "2", "-subj", "/CN=fake-kubelet",
                                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
                    context.load_cert_chain(str(cert), str(key))
                server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _log_handler(self))
                server.daemon_threads = True
                server.socket = context.wrap_socket(server.socket, server_side=True)
                threading.Thread(target=server.serve_forever, name="fake-kubelet-logs", daemon=True).start()
                self._log_server = server
            return int(self._log_server.server_address[1])

    def container_log(self, namespace: str, pod: str, container: str) -> str | None:
        with self._lock:
            return self._logs.get((namespace, pod, container))

    def set_pod_ready(self, namespace: str, name: str, ready: bool) -> None:
        """Force a running pod's readiness (sticks until called again)."""
        pod = json.loads(self._core().read_namespaced_pod(name, namespace, _preload_content=False).data)
        with self._lock:
            self._pinned_ready[pod["metadata"]["uid"]] = ready
        self._start_pod(pod, force=True)

    # --- heartbeats -------------------------------------------------------------
    def _post_status(self, node: FakeNode) -> None:
        try:
            self._core().patch_node_status(node.name, {"status": node.status(_now())})
        except ApiException as exc:
            if exc.status != 404:
                self._error(f"node status {node.name}: {exc.status} {exc.reason}")
        except Exception as exc:  # noqa: BLE001 - apiserver down: next heartbeat retries
            log.debug("node status %s: %r", node.name, exc)

    def _sync_condition_taints(self, node: FakeNode) -> None:
        """Do what the node-lifecycle controller (disabled in the harness) does
        for readiness: the apiserver's TaintNodesByCondition admission puts
        ``node.kubernetes.io/not-ready:NoSchedule`` on every new node; remove
        it while the node is Ready, put it back when it is not."""
        ready = node.conditions.get("Ready", {}).get("status") == "True"
        core = self._core()
        for _ in range(10):
            obj = json.loads(core.read_node(node.name, _preload_content=False).data)
            taints = obj["spec"].get("taints") or []
            has = any(t["key"] == NOT_READY_TAINT["key"] and t["effect"] == "NoSchedule" for t in taints)
            if ready == (not has):
                return
            if ready:
                new = [t for t in taints if not (t["key"] == NOT_READY_TAINT["key"] and t["effect"] == "NoSchedule")]
            else:
                new = [*taints, {**NOT_READY_TAINT, "timeAdded": _now()}]
            obj["spec"]["taints"] = new
            try:
                core.replace_node(node.name, obj)
                return
            except ApiException as exc:
                if exc.status != 409:  # conflict: someone else changed the node; re-read
                    raise
        raise RuntimeError(f"could not update taints of {node.name}: too many conflicts")

    def _renew_lease(self, node: FakeNode) -> None:
        coord = self._coord()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node.name, "namespace": "kube-node-lease",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name,
                                              "uid": node.uid}] if node.uid else []},
            "spec": {"holderIdentity": node.name, "leaseDurationSeconds": self.lease_duration,
                     "renewTime": _now_micro()},
        }
        try:
            coord.patch_namespaced_lease(node.name, "kube-node-lease",
                                         {"spec": {"holderIdentity": node.name, "renewTime": _now_micro(),
                                                   "leaseDurationSeconds": self.lease_duration}})
        except ApiException as exc:
            if exc.status != 404:
                self._error(f"lease {node.name}: {exc.status} {exc.reason}")
                return
            try:
                coord.create_namespaced_lease("kube-node-lease", body)
            except ApiException as exc2:
                if exc2.status != 409:
                    self._error(f"lease create {node.name}: {exc2.status} {exc2.reason}")
        except Exception as exc:  # noqa: BLE001
            log.debug("lease %s: %r", node.name, exc)

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            with self._lock:
                nodes = [n for n in self._nodes.values() if n.heartbeats]
            for node in nodes:
                if self._stop.is_set():
                    return
                self._post_status(node)
                self._renew_lease(node)

    # --- pods -------------------------------------------------------------------
    def _pod_watch_loop(self) -> None:
        backoff = 0.2
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._list_pods()
                    self.synced.set()
                rv = self._watch_pods(rv)
                backoff = 0.2
            except ApiException as exc:
                if exc.status == 410:  # resourceVersion too old: re-list
                    rv = None
                    continue
                log.debug("pod watch: %r", exc)
                rv = None
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
            except Exception as exc:  # noqa: BLE001 - apiserver restarting, connection reset...
                if self._stop.is_set():
                    return
                log.debug("pod watch: %r", exc)
                rv = None
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)

    def _list_pods(self) -> str:
        resp = self._core().list_pod_for_all_namespaces(field_selector="spec.nodeName!=", _preload_content=False,
                                                        _request_timeout=30)
        data = json.loads(resp.data)
        for pod in data.get("items", []):
            self._consider(pod)
        return data["metadata"]["resourceVersion"]

    def _watch_pods(self, rv: str) -> str:
        resp = self._core().list_pod_for_all_namespaces(
            field_selector="spec.nodeName!=", watch=True, resource_version=rv, allow_watch_bookmarks=True,
            timeout_seconds=60, _preload_content=False, _request_timeout=(10, 90))
        self._watch_resp = resp
        buf = b""
        try:
            for chunk in resp.stream(amt=None, decode_content=True):
                if self._stop.is_set():
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            raise ApiException(status=410, reason="Gone")
                        raise ApiException(status=obj.get("code", 500), reason=obj.get("message"))
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self._consider(obj)
                    elif ev.get("type") == "DELETED":
                        self._forget(obj["metadata"]["uid"])
        finally:
            self._watch_resp = None
            resp.release_conn()
        return rv

    def _forget(self, uid: str) -> None:
        with self._lock:
            for d in (self._pinned_ready, self._ready_at, self._deleting_since, self._finalize_due):
                d.pop(uid, None)
            self._ready_timer.discard(uid)
            self._marked_terminating.discard(uid)

    def _consider(self, pod: dict[str, Any]) -> None:
        node_name = (pod.get("spec") or {}).get("nodeName")
        with self._lock:
            if node_name not in self._nodes:
                return
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            with self._lock:
                self._deleting_since.setdefault(meta["uid"], time.time())
            self._work.put(("terminate", pod))
            return
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return
        if self._is_started(pod):
            return
        self._work.put(("start", pod))

    def _wanted_ready(self, pod: dict[str, Any]) -> tuple[bool, float | None]:
        """Whether the pod should be Ready now, and (when not yet) the epoch second it becomes Ready."""
        meta = pod["metadata"]
        uid = meta["uid"]
        with self._lock:
            if uid in self._pinned_ready:
                return self._pinned_ready[uid], None
            annotations = meta.get("annotations") or {}
            if annotations.get(NEVER_READY_ANNOTATION, "").lower() == "true":
                return False, None
            delay = self._start_delays.get(meta.get("namespace", ""), 0.0)
            if START_DELAY_ANNOTATION in annotations:
                delay = _number(annotations[START_DELAY_ANNOTATION]) or 0.0
            if delay <= 0:
                return True, None
            at = self._ready_at.setdefault(uid, time.time() + delay)
        return (True, None) if time.time() >= at else (False, at)

    def _is_started(self, pod: dict[str, Any]) -> bool:
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or not status.get("podIP"):
            return False
        want, at = self._wanted_ready(pod)
        ready = any(c.get("type") == "Ready" and c.get("status") == ("True" if want else "False")
                    for c in status.get("conditions") or [])
        if ready and at is not None:
            self._work.put(("ready-timer", (at, pod)))  # e.g. a pod found not Ready yet after a re-list
        return ready

    def _worker_loop(self) -> None:
        while not self._stop.is_set():
            timeout = None
            if self._timers:
                timeout = max(0.0, self._timers[0][0] - time.time())
            try:
                kind, item = self._work.get(timeout=timeout)
            except queue.Empty:
                kind, item = "tick", None
            if kind == "start" and self.pod_start_delay:
                heapq.heappush(self._timers, (time.time() + self.pod_start_delay, next(self._seq), "reread",
                                              _pod_ref(item)))
            elif kind == "ready-timer":
                at, pod = item
                uid = pod["metadata"]["uid"]
                with self._lock:
                    fresh = uid not in self._ready_timer
                    self._ready_timer.add(uid)
                if fresh:
                    heapq.heappush(self._timers, (at, next(self._seq), "reread", _pod_ref(pod)))
            elif kind in ("start", "resync", "terminate"):
                self._do(kind, item)
            now = time.time()
            while self._timers and self._timers[0][0] <= now and not self._stop.is_set():
                _, _, tkind, titem = heapq.heappop(self._timers)
                self._do(tkind, titem)

    def _do(self, kind: str, item: Any) -> None:
        try:
            if kind == "start":
                self._start_pod(item)
            elif kind == "reread":  # a timer fired: act on the pod as it is now, not as it was
                self._reread(*item)
            elif kind == "terminate":
                self._terminate(item)
            elif kind == "finalize":
                self._finalize_pod(*item)
            elif kind == "resync":
                self._list_pods()
        except Exception as exc:  # noqa: BLE001 - e.g. apiserver restarting: retry shortly
            if self._stop.is_set():
                return
            log.debug("worker %s: %r", kind, exc)
            heapq.heappush(self._timers, (time.time() + 1.0, next(self._seq), kind, item))

    def _reread(self, namespace: str, name: str, uid: str) -> None:
        with self._lock:
            self._ready_timer.discard(uid)
        try:
            pod = json.loads(self._core().read_namespaced_pod(name, namespace, _preload_content=False).data)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        if pod["metadata"]["uid"] == uid:
            self._consider(pod)

    def _terminate(self, pod: dict[str, Any]) -> None:
        """A pod with a deletionTimestamp: mark it not Ready (once), and plan its finalisation."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = meta["uid"]
        with self._lock:
            requested = self._deleting_since.setdefault(uid, time.time())
        grace = _number(meta.get("deletionGracePeriodSeconds"))
        if grace is None:
            grace = _number(spec.get("terminationGracePeriodSeconds"))
        grace = 30.0 if grace is None else max(0.0, grace)
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            grace = 0.0  # the containers ended already: the kubelet removes the pod at once
        # deletionTimestamp = request + grace, in whole seconds: the request was no earlier than that says.
        requested = min(requested, _parse_time(meta["deletionTimestamp"]) - grace + 1)
        due = requested + grace
        if grace > 0:
            hook = prestop_sleep_seconds(spec)
            shutdown = _number((meta.get("annotations") or {}).get(SHUTDOWN_ANNOTATION))
            sigterm = requested + min(hook, grace) if hook is not None else requested
            if hook is not None:  # the kubelet leaves a container at least 2 s after its preStop hook
                due = max(due, sigterm + MIN_GRACE_AFTER_HOOK)
            if shutdown is not None:
                due = min(due, sigterm + max(0.0, shutdown))
        with self._lock:
            old = self._finalize_due.get(uid)
            if old is None or due < old:  # a second delete may shorten the grace period, never lengthen it
                self._finalize_due[uid] = due
                heapq.heappush(self._timers, (due, next(self._seq), "finalize", (meta["namespace"], meta["name"], uid)))
            mark = uid not in self._marked_terminating
            self._marked_terminating.add(uid)
        status = pod.get("status") or {}
        if mark and status.get("phase") == "Running" and due > time.time():
            self._mark_not_ready(pod)

    def _mark_not_ready(self, pod: dict[str, Any]) -> None:
        """What the kubelet reports for a terminating pod: its containers run but are not ready."""
        meta, status = pod["metadata"], pod.get("status") or {}
        now = _now()
        conds = [{"type": t, "status": "False", "reason": "PodTerminating", "message": "fake kubelet: pod is terminating",
                  "lastTransitionTime": now} for t in ("ContainersReady", "Ready")]
        body: dict[str, Any] = {"status": {"conditions": conds}}
        statuses = status.get("containerStatuses") or []
        if statuses:
            body["status"]["containerStatuses"] = [{**c, "ready": False} for c in statuses]
        try:
            self._core().patch_namespaced_pod_status(meta["name"], meta["namespace"], body)
        except ApiException as exc:
            if exc.status not in (404, 409):
                self._error(f"pod status (terminating) {meta['namespace']}/{meta['name']}: {exc.status} {exc.reason}")

    def _start_pod(self, pod: dict[str, Any], force: bool = False) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        with self._lock:
            node = self._nodes.get(spec.get("nodeName"))
        if node is None or meta.get("deletionTimestamp"):
            return
        ready_flag, ready_at = self._wanted_ready(pod)
        if ready_at is not None:
            self._work.put(("ready-timer", (ready_at, pod)))
        if not force and self._is_started(pod):
            return
        if self._run_to_completion(pod, node):
            return
        status = pod.get("status") or {}
        now = _now()
        pod_ip = status.get("podIP") or node.pod_ip(meta["uid"])
        start_time = status.get("startTime") or now
        ready = "True" if ready_flag else "False"

        def cstatus(c: dict[str, Any], init: bool) -> dict[str, Any]:
            cid = hashlib.sha256(f"{meta['uid']}/{c['name']}".encode()).hexdigest()
            st: dict[str, Any] = {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"fake.local/{c.get('image', '')}@sha256:{cid}",
                "containerID": f"containerd://{cid}",
                "restartCount": 0,
            }
            if init:
                st.update(ready=True, started=False,
                          state={"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": start_time,
                                                "finishedAt": start_time, "containerID": st["containerID"]}})
            else:
                st.update(ready=ready_flag, started=True, state={"running": {"startedAt": start_time}})
            return st

        body = {"status": {
            "phase": "Running",
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": start_time,
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": ready, "lastTransitionTime": now},
                {"type": "Ready", "status": ready, "lastTransitionTime": now},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            ],
            "containerStatuses": [cstatus(c, False) for c in spec.get("containers", [])],
        }}
        if spec.get("initContainers"):
            body["status"]["initContainerStatuses"] = [cstatus(c, True) for c in spec["initContainers"]]
        try:
            self._core().patch_namespaced_pod_status(meta["name"], meta["namespace"], body)
            self.pods_started += 1
        except ApiException as exc:
            if exc.status not in (404, 409):
                self._error(f"pod status {meta['namespace']}/{meta['name']}: {exc.status} {exc.reason}")

    def _run_to_completion(self, pod: dict[str, Any], node: FakeNode) -> bool:
        """A pod whose container image has an output (set_run_output): it ran and ended. False otherwise."""
        meta, spec = pod["metadata"], pod["spec"]
        containers = spec.get("containers") or []
        with self._lock:
            runs = [(c, self._run_outputs[c.get("image", "")]) for c in containers
                    if c.get("image", "") in self._run_outputs]
        if not runs:
            return False
        now = _now()
        statuses, worst = [], 0
        for c in containers:
            output, code = next((r for cc, r in runs if cc is c), ("", 0))
            with self._lock:
                self._logs[(meta["namespace"], meta["name"], c["name"])] = output
            worst = worst or code
            cid = hashlib.sha256(f"{meta['uid']}/{c['name']}".encode()).hexdigest()
            statuses.append({"name": c["name"], "image": c.get("image", ""), "ready": False, "started": False,
                             "restartCount": 0, "imageID": f"fake.local/{c.get('image', '')}@sha256:{cid}",
                             "containerID": f"containerd://{cid}",
                             "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                                      "startedAt": now, "finishedAt": now,
                                                      "containerID": f"containerd://{cid}"}}})
        pod_ip = (pod.get("status") or {}).get("podIP") or node.pod_ip(meta["uid"])
        done = {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
        body = {"status": {
            "phase": "Succeeded" if worst == 0 else "Failed", "hostIP": node.ip, "hostIPs": [{"ip": node.ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": now,
            "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": now},
                           {**done, "type": "ContainersReady"}, done,
                           {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
            "containerStatuses": statuses,
        }}
        try:
            self._core().patch_namespaced_pod_status(meta["name"], meta["namespace"], body)
            self.pods_started += 1
        except ApiException as exc:
            if exc.status not in (404, 409):
                self._error(f"pod status (completed) {meta['namespace']}/{meta['name']}: {exc.status} {exc.reason}")
        return True

    def _finalize_pod(self, namespace: str, name: str, uid: str) -> None:
        opts = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            self._core().delete_namespaced_pod(name, namespace, body=opts, grace_period_seconds=0)
            self.pods_finalized += 1
        except ApiException as exc:
            if exc.status not in (404, 409):
                self._error(f"pod delete {namespace}/{name}: {exc.status} {exc.reason}")

    def _error(self, msg: str) -> None:
        log.warning("fake kubelet: %s", msg)
        self.errors.append(msg)


def _log_handler(kubelet: FakeKubelet) -> type[http.server.BaseHTTPRequestHandler]:
    """The kubelet's `GET /containerLogs/NS/POD/CONTAINER[?limitBytes=N]`, what the apiserver's pods/log proxies."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
            text = kubelet.container_log(*parts[1:4]) if len(parts) == 4 and parts[0] == "containerLogs" else None
            if text is None:
                self.send_error(404, "no such container log")
                return
            data = text.encode()
            limit = urllib.parse.parse_qs(url.query).get("limitBytes")
            if limit and limit[0].isdigit():
                data = data[:int(limit[0])]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the test output stays readable
            log.debug("log server: " + format, *args)

    return Handler


def _pod_ref(pod: dict[str, Any]) -> tuple[str, str, str]:
    meta = pod["metadata"]
    return meta["namespace"], meta["name"], meta["uid"]
