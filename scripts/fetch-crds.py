#!/usr/bin/env python3
"""Fetch the routers' own CustomResourceDefinitions, pinned by version, from the Go module proxy (their
published Go modules carry the CRD YAML) and cache them for the integration tests, like the control-plane
binaries. Nothing is hand-written here: each file is the upstream YAML document, selected by name.

Output: ${GPUTUI_CACHE:-~/.cache/gputui}/crds/<hash of this script>/<plural>.<group>.yaml, one CRD per file; the last
line printed is that directory. Idempotent: a complete cache is reused at once. A fetch is written to a
temporary directory and renamed into place only when complete.

Two upstream facts shape what is taken:
- SMI's module ships its TrafficSplit CRD as apiextensions.k8s.io/v1beta1, which Kubernetes stopped
  serving in 1.22. It is converted mechanically to v1 (the per-CRD schema and printer columns moved into
  each version) and its schema's root given `type: object`, which v1's structural-schema rule requires;
  no field of the schema is changed.
- The Gateway API Inference Extension's module answers 403 to a listing of its versions (`go list -m
  -versions`, `@v/list`, `@latest`), but serves the versions asked for by name: v1.6.0 (2026-08-10, the
  newest served; v1.6.1 and v1.7.0 answer 403) carries its GA InferencePool CRD
  (inference.networking.k8s.io/v1) in config/crd/bases/. `go mod download` checks the zip against
  sum.golang.org as for every pin here.
- NVIDIA's maintenance-operator (NodeMaintenance, issue 40): its main module, which holds config/crd/bases/,
  answers 403 (v0.3.0, v0.2.3, pseudo-versions); its API module github.com/Mellanox/maintenance-operator/api@v0.3.0
  is served, Go types only. The CRD is generated from those types with controller-gen at the version upstream's
  Makefile pins (CONTROLLER_TOOLS_VERSION ?= v0.16.5), as upstream's `make manifests` does: the output is
  byte-identical to tag v0.3.0's config/crd/bases/maintenance.nvidia.com_nodemaintenances.yaml (checked with diff
  against a snapshot of the repository; docs/disruption-actors.md). controller-gen is built once into the cache.
  The same run writes MaintenanceOperatorConfig's CRD (its global limits, maxParallelOperations and maxUnavailable,
  which size a batch: issue 40 item 3), taken too.
- Karpenter (NodeClaim, NodePool): sigs.k8s.io/karpenter@v1.13.0, pkg/apis/crds/ (the newest version Go 1.26.8
  downloads without a toolchain switch).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

# module@version -> [(file in the module, CRD names to take from it)]
PINS: dict[str, list[tuple[str, list[str]]]] = {
    "sigs.k8s.io/gateway-api@v1.6.3": [
        ("config/crd/standard/gateway.networking.k8s.io_httproutes.yaml", ["httproutes.gateway.networking.k8s.io"]),
    ],
    "istio.io/api@v1.32.0": [
        ("kubernetes/customresourcedefinitions.gen.yaml",
         ["virtualservices.networking.istio.io", "destinationrules.networking.istio.io"]),
    ],
    "github.com/argoproj/argo-rollouts@v1.8.3": [  # all five: its controller waits for each kind's informer
        ("manifests/crds/rollout-crd.yaml", ["rollouts.argoproj.io"]),
        ("manifests/crds/analysis-run-crd.yaml", ["analysisruns.argoproj.io"]),
        ("manifests/crds/analysis-template-crd.yaml", ["analysistemplates.argoproj.io"]),
        ("manifests/crds/cluster-analysis-template-crd.yaml", ["clusteranalysistemplates.argoproj.io"]),
        ("manifests/crds/experiment-crd.yaml", ["experiments.argoproj.io"]),
    ],
    # The GPU Operator publishes no tagged module version; this is the proxy's latest (its main, 2025-09-17).
    "github.com/NVIDIA/gpu-operator@v0.0.0-20250917190837-d73a0086a6ba": [
        ("deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml", ["clusterpolicies.nvidia.com"]),
    ],
    "github.com/servicemeshinterface/smi-sdk-go@v0.5.0": [
        ("crds/split.yaml", ["trafficsplits.split.smi-spec.io"]),
    ],
    "sigs.k8s.io/gateway-api-inference-extension@v1.6.0": [
        ("config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",
         ["inferencepools.inference.networking.k8s.io"]),
    ],
    "sigs.k8s.io/karpenter@v1.13.0": [
        ("pkg/apis/crds/karpenter.sh_nodeclaims.yaml", ["nodeclaims.karpenter.sh"]),
        ("pkg/apis/crds/karpenter.sh_nodepools.yaml", ["nodepools.karpenter.sh"]),
    ],
}
# CRDs generated from a module's Go types (its YAML is in no module served): module@version -> (the package of the
# types, controller-gen's version, CRD names to take from what it writes).
CONTROLLER_GEN = "sigs.k8s.io/controller-tools/cmd/controller-gen"
GENERATED: dict[str, tuple[str, str, list[str]]] = {
    "github.com/Mellanox/maintenance-operator/api@v0.3.0": (
        "github.com/Mellanox/maintenance-operator/api/v1alpha1", "v0.16.5",
        ["nodemaintenances.maintenance.nvidia.com", "maintenanceoperatorconfigs.maintenance.nvidia.com"]),
}


def log(message: str) -> None:
    print(f"[fetch-crds] {message}", file=sys.stderr)


def module_dir(module: str, gopath: Path) -> Path:
    done = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, env=go_env(gopath),
                          cwd=gopath, timeout=600)
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or info.get("Error") or not info.get("Dir"):
        raise SystemExit(f"[fetch-crds] ERROR: go mod download {module}: {info.get('Error') or done.stderr.strip()}")
    return Path(info["Dir"])


def go_env(gopath: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, GOPATH=str(gopath), GOFLAGS="-mod=mod", GO111MODULE="on", **extra)


def generated_crds(module: str, package: str, tools: str, gopath: Path, scratch: Path) -> dict[str, dict]:
    """Every CRD controller-gen `tools` writes for `package` of `module` (pinned), by name: a scratch module
    requiring the pin, its go.sum checked as `go mod tidy` checks it, controller-gen run over the package."""
    gobin = gopath / "bin" / f"controller-gen-{tools}"
    tool = gobin / "controller-gen"
    if not tool.is_file():
        done = subprocess.run(["go", "install", f"{CONTROLLER_GEN}@{tools}"], capture_output=True, text=True,
                              env=go_env(gopath, GOBIN=str(gobin)), cwd=gopath, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"[fetch-crds] ERROR: go install controller-gen@{tools}: {done.stderr.strip()[-2000:]}")
    path, version = module.split("@")
    work = scratch / "gen"
    work.mkdir(parents=True)
    (work / "go.mod").write_text(f"module gputui.test/crdgen\n\ngo 1.24\n\nrequire {path} {version}\n")
    (work / "gen.go").write_text(f'package crdgen\n\nimport _ "{package}"\n')
    out = scratch / "out"
    for argv in (["go", "mod", "tidy"], [str(tool), "crd", f"paths={package}", f"output:crd:dir={out}"]):
        done = subprocess.run(argv, capture_output=True, text=True, env=go_env(gopath), cwd=work, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"[fetch-crds] ERROR: {' '.join(argv[:2])} for {module}: {done.stderr.strip()[-2000:]}")
    crds = {}
    for file in sorted(out.glob("*.yaml")):
        for d in yaml.safe_load_all(file.read_text()):
            if d and d.get("kind") == "CustomResourceDefinition":
                crds[d["metadata"]["name"]] = d
    return crds


def to_v1(crd: dict) -> dict:
    """apiextensions.k8s.io/v1beta1 -> v1, moving what v1 keeps per version; the schema is not touched."""
    if crd.get("apiVersion") == "apiextensions.k8s.io/v1":
        return crd
    spec = dict(crd["spec"])
    schema = (spec.pop("validation", None) or {}).get("openAPIV3Schema")
    if schema is not None:
        schema = {"type": "object", **schema}  # v1 wants a structural schema: its root typed
    columns = [{("jsonPath" if k == "JSONPath" else k): v for k, v in c.items()}
               for c in spec.pop("additionalPrinterColumns", None) or []]
    subresources = spec.pop("subresources", None)
    spec.pop("version", None)
    versions = []
    for v in spec["versions"]:
        v = dict(v)
        if schema is not None:
            v["schema"] = {"openAPIV3Schema": schema}
        if columns:
            v["additionalPrinterColumns"] = columns
        if subresources:
            v["subresources"] = subresources
        versions.append(v)
    spec["versions"] = versions
    spec.setdefault("preserveUnknownFields", False)
    return {**crd, "apiVersion": "apiextensions.k8s.io/v1", "spec": spec}


def main() -> None:
    # Keyed by this script's own text: new pins or a new conversion make a new cache.
    pins_hash = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("GPUTUI_CACHE", Path.home() / ".cache/gputui"))
    out = cache / "crds" / pins_hash
    wanted = [name for files in PINS.values() for _f, names in files for name in names] + \
        [name for _p, _t, names in GENERATED.values() for name in names]
    if all((out / f"{name}.yaml").is_file() for name in wanted):
        log(f"up to date: {len(wanted)} CRDs already fetched; nothing to do")
        print(out)
        return
    gopath = cache / "gomod"
    gopath.mkdir(parents=True, exist_ok=True)
    (cache / "crds").mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="fetching-", dir=cache / "crds"))
    try:
        for module, files in PINS.items():
            root = module_dir(module, gopath)
            for file, names in files:
                docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all((root / file).read_text())
                        if d and d.get("kind") == "CustomResourceDefinition"}
                for name in names:
                    if name not in docs:
                        raise SystemExit(f"[fetch-crds] ERROR: {name} not in {module}/{file}")
                    crd = to_v1(docs[name])
                    crd.setdefault("metadata", {}).setdefault("annotations", {})["gputui.test/source"] = \
                        f"{module}/{file}"
                    (staging / f"{name}.yaml").write_text(yaml.safe_dump(crd, sort_keys=False))
                    log(f"{name} from {module}")
        for module, (package, tools, names) in GENERATED.items():
            module_dir(module, gopath)  # checked against sum.golang.org like every pin
            with tempfile.TemporaryDirectory(prefix="generating-", dir=cache / "crds") as scratch:
                made = generated_crds(module, package, tools, gopath, Path(scratch))
            for name in names:
                if name not in made:
                    raise SystemExit(f"[fetch-crds] ERROR: controller-gen {tools} wrote no {name} for {module}")
                made[name].setdefault("metadata", {}).setdefault("annotations", {})["gputui.test/source"] = \
                    f"{module} ({package}, controller-gen {tools})"
                (staging / f"{name}.yaml").write_text(yaml.safe_dump(made[name], sort_keys=False))
                log(f"{name} generated from {module} by controller-gen {tools}")
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # The module cache is read-only by design; make it removable like any cache.
    subprocess.run(["chmod", "-R", "u+w", str(gopath / "pkg")], check=False)
    print(out)


if __name__ == "__main__":
    main()
