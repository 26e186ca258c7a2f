"""Install the routers' real, published CRDs (with their schemas, defaults and validation) and wait until
served. scripts/fetch-crds.py takes them, pinned, from the Go modules their projects publish; it is run
here too (it returns at once when its cache is complete), so a test run outside scripts/test.sh finds them.
A CRD that cannot be fetched or installed fails the test loudly."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from types import ModuleType

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.procs import HarnessError

ROOT = Path(__file__).resolve().parents[2]

# plural -> (group, the version the tests speak, kind)
ROUTE_CRDS = {
    "httproutes": ("gateway.networking.k8s.io", "v1", "HTTPRoute"),
    "virtualservices": ("networking.istio.io", "v1", "VirtualService"),
    "destinationrules": ("networking.istio.io", "v1", "DestinationRule"),
    "rollouts": ("argoproj.io", "v1alpha1", "Rollout"),
    # What Argo Rollouts' controller watches besides its Rollouts (it waits for every informer).
    "analysisruns": ("argoproj.io", "v1alpha1", "AnalysisRun"),
    "analysistemplates": ("argoproj.io", "v1alpha1", "AnalysisTemplate"),
    "clusteranalysistemplates": ("argoproj.io", "v1alpha1", "ClusterAnalysisTemplate"),
    "experiments": ("argoproj.io", "v1alpha1", "Experiment"),
    "clusterpolicies": ("nvidia.com", "v1", "ClusterPolicy"),  # the GPU Operator's (its upgrade policy)
    "trafficsplits": ("split.smi-spec.io", "v1alpha4", "TrafficSplit"),
    # The Gateway API Inference Extension's GA pool (an HTTPRoute's backendRef, the endpoint picker's pods).
    "inferencepools": ("inference.networking.k8s.io", "v1", "InferencePool"),
}
# CRDs of kinds gputui's router table does not hold, which a test adds to it by itself: plural -> (group, version,
# kind, the pinned module of scripts/fetch-crds.py that publishes it, the file in that module).
MODULE_CRDS = {
    "grpcroutes": ("gateway.networking.k8s.io", "v1", "GRPCRoute", "sigs.k8s.io/gateway-api@",
                   "config/crd/standard/gateway.networking.k8s.io_grpcroutes.yaml"),
}


def _api(plural: str) -> tuple[str, str, str]:
    """(group, version, kind) of a CRD the tests install."""
    if plural in ROUTE_CRDS:
        return ROUTE_CRDS[plural]
    group, version, kind, _module, _file = MODULE_CRDS[plural]
    return group, version, kind


@cache
def _fetch_crds() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_crds", ROOT / "scripts/fetch-crds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _module_crd(plural: str) -> dict:
    """A CRD from a Go module scripts/fetch-crds.py pins, at that pin, taken as it takes its own: `go mod download`
    into the same module cache (a no-op once crd_dir() has run), the YAML document by name."""
    group, _version, _kind, prefix, file = MODULE_CRDS[plural]
    fetch = _fetch_crds()
    module = next(m for m in fetch.PINS if m.startswith(prefix))
    cache_root = Path(os.environ.get("GPUTUI_CACHE", Path.home() / ".cache/gputui"))
    crd_dir()  # the pinned modules are downloaded
    try:
        root = fetch.module_dir(module, cache_root / "gomod")
    except SystemExit as exc:
        raise HarnessError(str(exc)) from None
    name = f"{plural}.{group}"
    docs = [d for d in yaml.safe_load_all((root / file).read_text()) if d and d.get("kind") == "CustomResourceDefinition"]
    crd = next((d for d in docs if d["metadata"]["name"] == name), None)
    if crd is None:
        raise HarnessError(f"{name} not in {module}/{file}")
    return crd


@cache
def crd_dir() -> Path:
    done = subprocess.run([sys.executable, str(ROOT / "scripts/fetch-crds.py")], capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise HarnessError(f"fetching the routers' CRDs failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def real_crd(plural: str) -> dict:
    if plural in MODULE_CRDS:
        return _module_crd(plural)
    group = ROUTE_CRDS[plural][0]
    path = crd_dir() / f"{plural}.{group}.yaml"
    if not path.is_file():
        raise HarnessError(f"{path} missing: scripts/fetch-crds.py did not fetch {plural}.{group}")
    return yaml.safe_load(path.read_text())


def install_crd(api: client.ApiClient, plural: str, timeout: float = 30) -> None:
    group, version, _kind = _api(plural)
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(real_crd(plural))
    except ApiException as exc:
        if exc.status != 409:
            raise HarnessError(f"installing the {plural}.{group} CRD failed: {exc.status} {exc.body}") from None
    deadline = time.monotonic() + timeout
    custom = client.CustomObjectsApi(api)
    while True:
        try:
            custom.list_cluster_custom_object(group, version, plural, _preload_content=False)
            return
        except ApiException:
            if time.monotonic() > deadline:
                raise HarnessError(f"CRD {plural}.{group} never became served") from None
            time.sleep(0.2)


def create_custom(api: client.ApiClient, plural: str, namespace: str, body: dict) -> dict:
    group, version, kind = _api(plural)
    body = {"apiVersion": f"{group}/{version}", "kind": kind, **body}
    resp = client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, namespace, plural, body,
                                                                        _preload_content=False)
    return json.loads(resp.data)


def get_custom(api: client.ApiClient, plural: str, namespace: str, name: str) -> dict:
    group, version, _ = _api(plural)
    resp = client.CustomObjectsApi(api).get_namespaced_custom_object(group, version, namespace, plural, name,
                                                                     _preload_content=False)
    return json.loads(resp.data)
