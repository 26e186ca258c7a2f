"""docs/rbac.yaml's identity on the real cluster: its ServiceAccount's token in a kubeconfig, waited on until the
authorizer applies it. Shared by the role's own tests and any test that runs gputui under the role."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.gputui_cli import run
from tests.support.procs import wait_until

ROOT = Path(__file__).resolve().parents[2]
ROLE_FILE = ROOT / "docs" / "rbac.yaml"


def kubeconfig_for(cluster, path: Path, token: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": {"server": cluster.api_url, "certificate-authority": str(cluster.ca_file)}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}]}))
    path.chmod(0o600)
    return path


def token_of(cluster, account: str) -> str:
    return cluster.kubectl("-n", "gputui", "create", "token", account, "--duration", "2h").stdout.decode().strip()


def wait_rbac(cluster, kubeconfig: Path) -> None:
    """RBAC applies from the authorizer's cache: wait until the identity may list nodes."""
    def can_list() -> bool:
        return run("nodes", "--read-only", "--kubeconfig", str(kubeconfig), "-o", "json").returncode == 0
    wait_until(can_list, 30, interval=0.5, what="the role bound")


def role_rules() -> tuple[dict, list[dict]]:
    """docs/rbac.yaml's ClusterRole and its rules, as a test takes some out of a copy."""
    role = next(d for d in yaml.safe_load_all(ROLE_FILE.read_text()) if d and d["kind"] == "ClusterRole")
    return role, list(role["rules"])


def bound_role(name: str, namespace: str, rules: list[dict]) -> list[dict]:
    """A copy of docs/rbac.yaml's ClusterRole named `name` with these rules, bound to a ServiceAccount `name` in
    `namespace`: the objects to apply."""
    role, _ = role_rules()
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        {**role, "metadata": {"name": name}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]
