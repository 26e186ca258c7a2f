"""A real Kubernetes control plane for the integration tests.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built from
the Go modules by ``scripts/build-control-plane.sh``, run on free loopback
ports with a temporary directory each session. Authentication is by static
tokens (``--token-auth-file``), authorization by RBAC, and every request is
written to an audit log (level Metadata, or Request with ``audit_level="Request"``:
then each event holds the request's body too, ``requestObject``; evictions and pod
deletions hold theirs at either level) so tests can prove who sent what.

Users (see :data:`USERS`):

``admin``        gputui-admin, group system:masters: what the app runs as.
``readonly``     gputui-readonly, bound by RBAC to get/list/watch only.
``harness``      gputui-harness, system:masters: test setup (kept apart from
                 ``admin`` so the audit log separates app traffic from setup).
``kubelet``      the fake kubelet. ``controller-manager``, ``scheduler``.

Binaries: ``$GPUTUI_K8S_BIN`` or ``${GPUTUI_CACHE:-~/.cache/gputui}/k8s/<K8S_VERSION>/bin``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml

from tests.support.procs import (
    LOOPBACK,
    HarnessError,
    ManagedProcess,
    free_port,
    http,
    port_is_free,
    run,
    wait_for,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO_ROOT / "scripts" / "k8s-versions.env"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-control-plane.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")

READ_VERBS = frozenset({"get", "list", "watch"})


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """KEY=value pairs of scripts/k8s-versions.env (the one place versions live)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


_VERSIONS = read_versions()
K8S_VERSION: str = os.environ.get("K8S_VERSION") or _VERSIONS["K8S_VERSION"]
ETCD_VERSION: str = os.environ.get("ETCD_VERSION") or _VERSIONS["ETCD_VERSION"]


def default_bin_dir(version: str = K8S_VERSION) -> Path:
    root = Path(os.environ.get("GPUTUI_CACHE") or Path.home() / ".cache" / "gputui")
    return root / "k8s" / version / "bin"


def find_binaries() -> Path:
    """The directory holding the control-plane binaries, or a loud error."""
    env = os.environ.get("GPUTUI_K8S_BIN")
    bin_dir = Path(env) if env else default_bin_dir()
    missing = [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        source = "$GPUTUI_K8S_BIN" if env else "the build cache"
        raise HarnessError(
            f"Kubernetes {K8S_VERSION} control-plane binaries missing from {bin_dir} ({source}): "
            f"{', '.join(missing)}.\nBuild them first: bash {BUILD_SCRIPT.relative_to(REPO_ROOT)}"
        )
    return bin_dir


@dataclass(frozen=True)
class User:
    key: str  # short name used by the harness API: "admin", "readonly", ...
    name: str  # Kubernetes user name (what the audit log shows)
    groups: tuple[str, ...]
    token: str
    uid: str


def _make_users() -> dict[str, User]:
    spec = {
        "admin": ("gputui-admin", ("system:masters",)),
        "readonly": ("gputui-readonly", ("gputui:readonly",)),
        "harness": ("gputui-harness", ("system:masters",)),
        "kubelet": ("gputui-fake-kubelet", ("system:masters",)),
        "controller-manager": ("system:kube-controller-manager", ("system:masters",)),
        "scheduler": ("system:kube-scheduler", ("system:masters",)),
    }
    return {
        key: User(key, name, groups, secrets.token_hex(24), f"uid-{i}")
        for i, (key, (name, groups)) in enumerate(spec.items(), start=1)
    }


READONLY_CLUSTERROLE = "gputui-readonly"

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # One event per request (plus ResponseStarted for long-running watches).
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
AUDIT_LEVELS = ("Metadata", "Request", "RequestResponse")
# Evictions and pod deletions are logged with their bodies even at Metadata (the session cluster's level): the
# grace period a drain asked for is in them (an eviction's deleteOptions, a delete's options), and the tests of
# issue 34 read it there. Few and small: everything else stays at the policy's one level.
POD_REMOVAL_BODIES: tuple[dict[str, Any], ...] = (
    {"level": "Request", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods/eviction"]}]},
    {"level": "Request", "verbs": ["delete"], "resources": [{"group": "", "resources": ["pods"]}]},
)


def audit_policy(level: str = "Metadata") -> dict[str, Any]:
    """AUDIT_POLICY at `level`: Request adds each request's body (an eviction's deleteOptions, a patch). At
    Metadata, evictions and pod deletions still carry theirs (POD_REMOVAL_BODIES)."""
    if level not in AUDIT_LEVELS:
        raise HarnessError(f"audit level {level!r}: one of {', '.join(AUDIT_LEVELS)}")
    bodies = [dict(rule) for rule in POD_REMOVAL_BODIES] if level == "Metadata" else []
    return {**AUDIT_POLICY, "rules": [*bodies, {"level": level}]}


@dataclass(frozen=True)
class AuditMark:
    """A position in the audit log; events after it are 'new'."""

    offset: int


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler.

    Attributes worth knowing: ``api_url``, ``ca_file``, ``admin_kubeconfig``,
    ``readonly_kubeconfig``, ``kubeconfigs`` (user key -> path),
    ``combined_kubeconfig`` (contexts ``gputui-test-admin`` and
    ``gputui-test-readonly``), ``audit_log_path``, ``users``, ``workdir``,
    ``bin_dir``, ``version``.
    """

    def __init__(self, bin_dir: Path | None = None, workdir: Path | None = None, *, keep_workdir: bool = False,
                 extra_args: dict[str, list[str]] | None = None, audit_level: str = "Metadata"):
        """``extra_args``: more flags per component, keyed "etcd", "kube-apiserver",
        "kube-controller-manager" or "kube-scheduler" (later flags win). ``audit_level``: the audit policy's
        one level, Metadata (the default) or Request (events carry ``requestObject``)."""
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        self.audit_policy = audit_policy(audit_level)
        self.bin_dir = Path(bin_dir) if bin_dir else find_binaries()
        self.version = K8S_VERSION
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="gputui-k8s-"))
        self.keep_workdir = keep_workdir or os.environ.get("GPUTUI_KEEP_TEST_DIRS") == "1"
        self.users = _make_users()
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.api_port = free_port()
        self.kcm_port = free_port()
        self.scheduler_port = free_port()
        self.api_url = f"https://{LOOPBACK}:{self.api_port}"
        self.cert_dir = self.workdir / "certs"
        # kube-apiserver self-signs into --cert-dir: apiserver.crt holds the
        # serving cert followed by the CA that signed it; ca.crt is that CA alone.
        self.serving_cert_file = self.cert_dir / "apiserver.crt"
        self.ca_file = self.workdir / "ca.crt"
        self.logs_dir = self.workdir / "logs"
        self.audit_log_path = self.workdir / "audit" / "audit.log"
        self.kubeconfigs: dict[str, Path] = {k: self.workdir / "kubeconfig" / f"{k}.yaml" for k in self.users}
        self.combined_kubeconfig = self.workdir / "kubeconfig" / "combined.yaml"
        self.timings: dict[str, float] = {}
        self.etcd: ManagedProcess | None = None
        self.apiserver: ManagedProcess | None = None
        self.controller_manager: ManagedProcess | None = None
        self.scheduler: ManagedProcess | None = None
        self._started = False

    # --- convenience accessors --------------------------------------------
    @property
    def admin_kubeconfig(self) -> Path:
        return self.kubeconfigs["admin"]

    @property
    def readonly_kubeconfig(self) -> Path:
        return self.kubeconfigs["readonly"]

    @property
    def harness_kubeconfig(self) -> Path:
        return self.kubeconfigs["harness"]

    def user(self, key: str) -> User:
        return self.users[key]

    def token(self, key: str) -> str:
        return self.users[key].token

    def processes(self) -> list[ManagedProcess]:
        return [p for p in (self.scheduler, self.controller_manager, self.apiserver, self.etcd) if p is not None]

    # --- lifecycle --------------------------------------------------------
    def start(self) -> ControlPlane:
        t_start = time.monotonic()
        try:
            self._prepare_files()
            self._start_etcd()
            self.timings["etcd"] = time.monotonic() - t_start
            self.start_apiserver()
            self.timings["apiserver"] = time.monotonic() - t_start
            self._write_kubeconfigs()
            self._create_readonly_rbac()
            self._start_controller_manager()
            self._start_scheduler()
            self._wait_controllers_ready()
            self.timings["total"] = time.monotonic() - t_start
            self._started = True
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process this object started, then remove its temp dir."""
        errors = []
        for p in self.processes():
            try:
                p.stop(timeout=10)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{p.name}: {exc!r}")
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            raise HarnessError("errors while stopping the control plane: " + "; ".join(errors))

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- files ------------------------------------------------------------
    def _prepare_files(self) -> None:
        for d in (self.cert_dir, self.logs_dir, self.audit_log_path.parent, self.workdir / "kubeconfig",
                  self.workdir / "etcd"):
            d.mkdir(parents=True, exist_ok=True)
        lines = [f'{u.token},{u.name},{u.uid},"{",".join(u.groups)}"' for u in self.users.values()]
        self.tokens_file = self.workdir / "tokens.csv"
        self.tokens_file.write_text("\n".join(lines) + "\n")
        self.tokens_file.chmod(0o600)
        self.audit_policy_file = self.workdir / "audit-policy.yaml"
        self.audit_policy_file.write_text(yaml.safe_dump(self.audit_policy))
        self.sa_key = self.workdir / "sa.key"
        run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", self.sa_key])

    def _kubeconfig_dict(self, keys: list[str]) -> dict[str, Any]:
        cluster = "gputui-test"
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": self.api_url,
                                                       "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": self.users[k].name, "user": {"token": self.users[k].token}} for k in keys],
            "contexts": [{"name": f"{cluster}-{k}", "context": {"cluster": cluster, "user": self.users[k].name}}
                         for k in keys],
            "current-context": f"{cluster}-{keys[0]}",
            "preferences": {},
        }

    def _write_kubeconfigs(self) -> None:
        for key, path in self.kubeconfigs.items():
            path.write_text(yaml.safe_dump(self._kubeconfig_dict([key]), sort_keys=False))
            path.chmod(0o600)
        self.combined_kubeconfig.write_text(
            yaml.safe_dump(self._kubeconfig_dict(["admin", "readonly"]), sort_keys=False))
        self.combined_kubeconfig.chmod(0o600)

    # --- etcd -------------------------------------------------------------
    def _start_etcd(self) -> None:
        client = f"http://{LOOPBACK}:{self.etcd_port}"
        peer = f"http://{LOOPBACK}:{self.etcd_peer_port}"
        self.etcd = ManagedProcess("etcd", [
            self.bin_dir / "etcd",
            "--name", "gputui-test",
            "--data-dir", self.workdir / "etcd",
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"gputui-test={peer}",
            "--listen-metrics-urls", f"http://{LOOPBACK}:{free_port()}",
            "--unsafe-no-fsync",
            "--log-level", "warn",
            *self.extra_args.get("etcd", []),
        ], self.logs_dir / "etcd.log").start()

        def healthy() -> bool:
            r = http().get(f"{client}/health", timeout=2)
            return r.status_code == 200 and r.json().get("health") == "true"

        self.etcd.wait_ready(healthy, timeout=30, what="GET /health")

    # --- kube-apiserver ---------------------------------------------------
    def _apiserver_argv(self) -> list[Any]:
        return [
            self.bin_dir / "kube-apiserver",
            f"--etcd-servers=http://{LOOPBACK}:{self.etcd_port}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={self.api_port}",
            f"--cert-dir={self.cert_dir}",
            f"--token-auth-file={self.tokens_file}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount",
            f"--service-account-issuer=https://{LOOPBACK}:{self.api_port}",
            f"--service-account-key-file={self.sa_key}",
            f"--service-account-signing-key-file={self.sa_key}",
            "--endpoint-reconciler-type=none",
            f"--audit-log-path={self.audit_log_path}",
            f"--audit-policy-file={self.audit_policy_file}",
            "--audit-log-mode=blocking",
            "--audit-log-format=json",
            "--audit-log-maxbackup=0",
            "--audit-log-maxsize=100000",  # MB: never rotate (AuditMark offsets must stay valid)
            # Close open watches on SIGTERM instead of waiting for them (HTTP/2
            # watches would hold a graceful shutdown for up to a minute).
            "--shutdown-watch-termination-grace-period=2s",
            "--profiling=false",
            "--v=1",
            *self.extra_args.get("kube-apiserver", []),
        ]

    def _session(self, key: str = "harness") -> requests.Session:
        s = http()  # ignores REQUESTS_CA_BUNDLE, which would replace s.verify
        s.headers["Authorization"] = f"Bearer {self.token(key)}"
        s.verify = str(self.ca_file if self.ca_file.exists() else self.serving_cert_file)
        return s

    def _extract_ca(self) -> None:
        """Write the CA certificate (CA:TRUE) of apiserver.crt to ca.crt."""
        if self.ca_file.exists():
            return
        text = self.serving_cert_file.read_text()
        blocks = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", text, re.S)
        for block in blocks:
            out = run(["openssl", "x509", "-noout", "-ext", "basicConstraints"], input=block.encode()).stdout
            if b"CA:TRUE" in out:
                self.ca_file.write_text(block if block.endswith("\n") else block + "\n")
                return
        raise HarnessError(f"no CA certificate in {self.serving_cert_file} ({len(blocks)} certificates)")

    def start_apiserver(self, timeout: float = 60) -> None:
        """Start kube-apiserver (same port, certs, etcd) and wait for /readyz 200."""
        if self.apiserver is not None and self.apiserver.running():
            raise HarnessError("kube-apiserver is already running")
        wait_for(lambda: port_is_free(self.api_port), timeout=15,
                 what=f"port {self.api_port} to be free for kube-apiserver")
        self.apiserver = ManagedProcess("kube-apiserver", self._apiserver_argv(),
                                        self.logs_dir / "kube-apiserver.log")
        self.apiserver.start()

        def ready() -> bool:
            if not self.serving_cert_file.exists():
                return False
            r = self._session().get(f"{self.api_url}/readyz", timeout=3)
            return r.status_code == 200

        self.apiserver.wait_ready(ready, timeout=timeout, what="GET /readyz == 200")
        self._extract_ca()

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (SIGTERM, then SIGKILL) and wait for it to exit."""
        if self.apiserver is not None:
            self.apiserver.stop(timeout=15)

    def kill_apiserver(self) -> None:
        """SIGKILL kube-apiserver (an abrupt crash)."""
        if self.apiserver is not None:
            self.apiserver.kill()

    def restart_apiserver(self) -> None:
        self.stop_apiserver()
        self.start_apiserver()

    def apiserver_running(self) -> bool:
        return self.apiserver is not None and self.apiserver.running()

    # --- RBAC for the unprivileged user -----------------------------------
    def _create_readonly_rbac(self) -> None:
        s = self._session("harness")
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": READONLY_CLUSTERROLE},
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
                {"nonResourceURLs": ["*"], "verbs": ["get"]},
            ],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": READONLY_CLUSTERROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": READONLY_CLUSTERROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": self.users["readonly"].name}],
        }
        base = f"{self.api_url}/apis/rbac.authorization.k8s.io/v1"
        for url, body in ((f"{base}/clusterroles", role), (f"{base}/clusterrolebindings", binding)):
            r = s.post(url, json=body, timeout=10)
            if r.status_code not in (200, 201, 409):
                raise HarnessError(f"creating {body['kind']} failed: {r.status_code} {r.text}")

        # RBAC is enforced from the authorizer's cache: wait until it applies.
        ro = self._session("readonly")

        def can_list() -> bool:
            return ro.get(f"{self.api_url}/api/v1/nodes", timeout=3).status_code == 200

        wait_for(can_list, timeout=15, what="RBAC read-only binding to take effect")

    # --- controller-manager and scheduler ---------------------------------
    def _start_controller_manager(self) -> None:
        kc = self.kubeconfigs["controller-manager"]
        self.controller_manager = ManagedProcess("kube-controller-manager", [
            self.bin_dir / "kube-controller-manager",
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={self.kcm_port}",
            f"--cert-dir={self.workdir / 'kcm-certs'}",
            # The fake kubelet keeps heartbeats, but node lifecycle would also
            # taint and evict when a test stops them; keep that out.
            "--controllers=*,-nodelifecycle",
            "--use-service-account-credentials=false",
            f"--service-account-private-key-file={self.sa_key}",
            f"--root-ca-file={self.ca_file}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--profiling=false",
            "--v=1",
            *self.extra_args.get("kube-controller-manager", []),
        ], self.logs_dir / "kube-controller-manager.log").start()

    def _start_scheduler(self) -> None:
        kc = self.kubeconfigs["scheduler"]
        self.scheduler = ManagedProcess("kube-scheduler", [
            self.bin_dir / "kube-scheduler",
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={self.scheduler_port}",
            f"--cert-dir={self.workdir / 'scheduler-certs'}",
            "--profiling=false",
            "--v=1",
            *self.extra_args.get("kube-scheduler", []),
        ], self.logs_dir / "kube-scheduler.log").start()

    def _wait_controllers_ready(self, timeout: float = 60) -> None:
        def healthz(port: int) -> bool:
            # Their serving certs are self-signed at startup: no CA to verify with.
            r = http().get(f"https://{LOOPBACK}:{port}/healthz", verify=False, timeout=3)
            return r.status_code == 200

        with _NoInsecureWarning():
            assert self.controller_manager and self.scheduler
            self.controller_manager.wait_ready(lambda: healthz(self.kcm_port), timeout=timeout,
                                               what="GET /healthz == 200")
            self.scheduler.wait_ready(lambda: healthz(self.scheduler_port), timeout=timeout,
                                      what="GET /healthz == 200")
        # Evidence of work: the service-account controller creates
        # "default" in every namespace, the root-CA publisher a ConfigMap.
        s = self._session("harness")

        def kcm_working() -> bool:
            sa = s.get(f"{self.api_url}/api/v1/namespaces/default/serviceaccounts/default", timeout=3)
            cm = s.get(f"{self.api_url}/api/v1/namespaces/default/configmaps/kube-root-ca.crt", timeout=3)
            return sa.status_code == 200 and cm.status_code == 200

        self.controller_manager.wait_ready(kcm_working, timeout=timeout,
                                           what="controllers to create default/default ServiceAccount")

    # --- clients ----------------------------------------------------------
    def client(self, user: str = "admin"):
        """A kubernetes.client.ApiClient loaded from that user's kubeconfig file."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfigs[user]))

    def admin_client(self):
        return self.client("admin")

    def readonly_client(self):
        return self.client("readonly")

    def harness_client(self):
        return self.client("harness")

    def kubectl(self, *args: str, user: str = "harness", check: bool = True, timeout: float = 60,
                input: bytes | None = None):
        """Run the built kubectl against this cluster as ``user``."""
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfigs[user]))
        return run([self.bin_dir / "kubectl", *args], env=env, check=check, timeout=timeout, input=input)

    # --- audit log --------------------------------------------------------
    def audit_mark(self) -> AuditMark:
        """The current end of the audit log: pass as ``since=`` to see only newer events."""
        try:
            return AuditMark(self.audit_log_path.stat().st_size)
        except FileNotFoundError:
            return AuditMark(0)

    def audit_events(
        self,
        user: str | None = None,
        *,
        since: AuditMark | None = None,
        verbs: set[str] | frozenset[str] | None = None,
        resource: str | None = None,
    ) -> list[dict[str, Any]]:
        """Audit events (dicts as written by the apiserver), oldest first.

        ``user`` is a user key ("admin", "readonly", ...) or a Kubernetes
        user name. Only the final event of each request is returned
        (stage ResponseComplete or Panic), so one request = one event.
        """
        username = self.users[user].name if user in self.users else user
        events: list[dict[str, Any]] = []
        try:
            with open(self.audit_log_path, "rb") as f:
                if since is not None and since.offset:
                    f.seek(since.offset - 1)
                    if f.read(1) != b"\n":
                        # The mark fell inside a line the apiserver was writing: that event is older than
                        # the mark, and its tail is no JSON (seen once: every read of it failed for 10 s).
                        f.readline()
                for raw in f:
                    if not raw.endswith(b"\n"):
                        break  # a line being written right now
                    ev = json.loads(raw)
                    if ev.get("stage") not in ("ResponseComplete", "Panic"):
                        continue
                    if username is not None and ev.get("user", {}).get("username") != username:
                        continue
                    if verbs is not None and ev.get("verb") not in verbs:
                        continue
                    if resource is not None and (ev.get("objectRef") or {}).get("resource") != resource:
                        continue
                    events.append(ev)
        except FileNotFoundError:
            pass
        return events

    def write_requests(self, user: str, *, since: AuditMark | None = None) -> list[dict[str, Any]]:
        """Every request by ``user`` whose verb is not get/list/watch (denied ones too)."""
        return [ev for ev in self.audit_events(user, since=since) if ev.get("verb") not in READ_VERBS]

    def wait_for_audit(self, user: str, *, since: AuditMark | None = None, timeout: float = 10,
                       **match: Any) -> list[dict[str, Any]]:
        """Wait until an event of ``user`` matching ``verb=``/``resource=``/``name=``/``code=`` shows up.

        The apiserver writes an event just after it answers, so a test that
        reads the log right after a request should wait with this.
        """

        def find() -> list[dict[str, Any]]:
            found = []
            for ev in self.audit_events(user, since=since):
                ref = ev.get("objectRef") or {}
                fields = {"verb": ev.get("verb"), "resource": ref.get("resource"), "name": ref.get("name"),
                          "namespace": ref.get("namespace"), "subresource": ref.get("subresource"),
                          "code": (ev.get("responseStatus") or {}).get("code")}
                if all(fields.get(k) == v for k, v in match.items()):
                    found.append(ev)
            return found

        return wait_for(find, timeout=timeout, interval=0.1, what=f"audit event of {user} matching {match}")

    # --- diagnostics ------------------------------------------------------
    def describe(self, lines: int = 15) -> str:
        """What a failing test wants to see: nodes and pods, then log tails."""
        parts = []
        if self.apiserver_running():
            res = self.kubectl("get", "nodes,pods", "-A", "-o", "wide", check=False, timeout=15)
            parts.append("--- kubectl get nodes,pods -A -o wide:\n" + res.stdout.decode(errors="replace")
                         + res.stderr.decode(errors="replace"))
        parts.extend(p.describe_failure(lines) for p in self.processes())
        return "\n".join(parts)


class _NoInsecureWarning:
    def __enter__(self) -> None:
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)
