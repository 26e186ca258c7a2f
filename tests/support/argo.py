"""Argo Rollouts' real controller, built from its module by scripts/build-argo-rollouts.sh, run against the
harness's control plane in one namespace: it makes a Rollout's ReplicaSets, moves its steps, patches the
routes it owns and writes the Rollout's status, as in a cluster. A missing binary or a controller that does
not come up fails the test loudly."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from tests.support.control_plane import read_versions
from tests.support.procs import HarnessError, ManagedProcess, free_port, http, log_tail, wait_until

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "build-argo-rollouts.sh"
ARGO_CRDS = ("rollouts", "analysisruns", "analysistemplates", "clusteranalysistemplates", "experiments")


@cache
def controller_binary() -> Path:
    """Built (or found in the cache) by the build script, which returns at once when it is there."""
    version = os.environ.get("ARGO_ROLLOUTS_VERSION") or read_versions()["ARGO_ROLLOUTS_VERSION"]
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "ARGO_ROLLOUTS_VERSION": version})
    binary = Path(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "") / "rollouts-controller"
    if done.returncode != 0 or not os.access(binary, os.X_OK):
        raise HarnessError(f"Argo Rollouts {version}'s controller could not be built:\n{done.stderr[-3000:]}")
    return binary


class ArgoController:
    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.healthz = free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="argo-rollouts-"))
        self.proc = ManagedProcess("rollouts-controller", [
            controller_binary(), "--kubeconfig", kubeconfig, "--namespaced", "--namespace", namespace,
            "--leader-elect=false", "--healthzPort", self.healthz, "--metricsport", free_port(),
            "--loglevel", "info",
        ], self.workdir / "rollouts-controller.log")

    def start(self) -> ArgoController:
        self.proc.start()

        def healthy() -> bool:
            if not self.proc.running():
                raise HarnessError(f"rollouts-controller exited:\n{log_tail(self.proc.log_path)}")
            try:
                return http().get(f"http://127.0.0.1:{self.healthz}/healthz", timeout=1).status_code == 200
            except OSError:
                return False

        wait_until(healthy, 60, what=f"rollouts-controller healthy\n{log_tail(self.proc.log_path)}")
        return self

    def log(self, lines: int = 60) -> str:
        return log_tail(self.proc.log_path, lines)

    def stop(self) -> None:
        """Stop the controller and remove its work dir (its log: a failing test has read it by now)."""
        try:
            self.proc.stop()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
