"""The demo cluster's API emulation: the writer's verbs (cordon, annotate with a resourceVersion precondition,
evict with PDB checks, delete, patch route objects) with the apiserver's answers."""


from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from gputui.backends.base import ConflictError, EvictionOutcome, EvictionResult, WriteError, stale_json_patch
from gputui.backends.demo.describe import describe
from gputui.backends.demo.diag_jobs import DemoJobs, node_object, pinned_node
from gputui.backends.demo.errors import DemoApiError
from gputui.backends.demo.fault_window import fault_window
from gputui.backends.demo.gpu_bindings import demo_bindings
from gputui.backends.demo.patches import json_patch, merge_patch
from gputui.backends.demo.review import arrivals, check_facts, idle_gpus, version_signals
from gputui.backends.demo.routes import backend_name, demo_kind, validate_route
from gputui.backends.demo.scenario import (
    A100,
    POD_START_S,
    SimNode,
    SimPod,
)
from gputui.backends.demo.simulation import Simulation
from gputui.backends.demo.workloads import annotate_pod, label_pod, scale
from gputui.policy.fault_peers import FaultWindow
from gputui.policy.node_pools import IdleReading
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.check_facts import CheckFacts
from gputui.vocabulary.gpu_bindings import GpuBindings
from gputui.vocabulary.model import InferencePod, InferenceService, NodeDescription
from gputui.vocabulary.router_kinds import ROUTER_KINDS
from gputui.vocabulary.sessions import Arrivals
from gputui.vocabulary.signals import VersionSignals


class DemoCluster(Simulation):
    """The simulated cluster, readable and writable. Thread-safe: the UI reads while ops write."""

    def describe(self, node: str, pods: Sequence[tuple[str, str]]) -> NodeDescription:
        with self._lock:
            return describe(self, node, pods)

    def check_facts(self, window_s: float) -> CheckFacts:
        with self._lock:
            return check_facts(self, window_s)

    def version_signals(self, snapshot: ClusterSnapshot, service: InferenceService,
                        window_s: float) -> dict[str, VersionSignals]:
        with self._lock:
            return version_signals(self, service, window_s)

    def arrivals(self, pods: Collection[InferencePod], window_s: float = 60.0) -> Mapping[str, Arrivals]:
        with self._lock:
            self._advance(self._clock())
            return arrivals(self, pods, window_s)

    def gpu_bindings(self, node: str, pods: Sequence[InferencePod]) -> GpuBindings:
        """As its simulated dcgm-exporter labels each GPU's series: complete (gputui.backends.demo.gpu_bindings)."""
        return demo_bindings(self, node)

    def idle_gpus(self, window_s: float, below_pct: float) -> IdleReading | None:
        with self._lock:
            self._advance(self._clock())
            return idle_gpus(self, window_s, below_pct)

    def fault_window(self, window_s: float) -> FaultWindow:
        """Every node's GPU fault counts over the window, from the faults its snapshot shows (demo.fault_window)."""
        return fault_window(self.snapshot(), window_s)

    def _node(self, name: str) -> SimNode:
        node = self._nodes.get(name)
        if node is None:
            raise WriteError(f'node "{name}" not found')
        return node

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        with self._lock:
            self._node(node).unschedulable = unschedulable

    def annotate_node(self, node: str, annotations: Mapping[str, str | None],
                      resource_version: str | None = None) -> None:
        with self._lock:
            sim = self._node(node)
            if resource_version is not None and resource_version != str(sim.version):
                raise ConflictError(f"node {node} changed since it was read")
            sim.version += 1
            target = sim.annotations
            for key, value in annotations.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value

    def _patch_node(self, name: str, patch: dict | list) -> dict:
        """A merge patch on a node, as the apiserver applies one to the fields the demo keeps: spec.unschedulable
        and the annotations (a cordon and its record in one write, gputui.ops.cordon)."""
        if not isinstance(patch, dict) or set(patch) - {"spec", "metadata"}:
            raise DemoApiError(422, f"the demo patches only a node's spec.unschedulable and annotations: {patch}")
        sim = self._node(name)
        spec, meta = patch.get("spec") or {}, patch.get("metadata") or {}
        if set(spec) - {"unschedulable"} or set(meta) - {"annotations"}:
            raise DemoApiError(422, f"the demo patches only a node's spec.unschedulable and annotations: {patch}")
        if "unschedulable" in spec:
            sim.unschedulable = bool(spec["unschedulable"])
        sim.annotations = merge_patch(sim.annotations, meta.get("annotations") or {})
        sim.version += 1
        return {"metadata": {"name": name, "annotations": dict(sim.annotations)},
                "spec": {"unschedulable": sim.unschedulable}}

    def node_annotations(self, node: str) -> tuple[dict[str, str], str]:
        with self._lock:
            sim = self._node(node)
            return dict(sim.annotations), str(sim.version)

    def evict_pod(self, namespace: str, name: str, grace_seconds: int | None = None,
                  uid: str | None = None) -> EvictionResult:
        with self._lock:
            self._advance(self._clock())
            pod = self._pods.get(f"{namespace}/{name}")
            if pod is None:
                return EvictionResult(EvictionOutcome.GONE)
            if uid is not None and pod.uid != uid:  # as the apiserver's 409 on deleteOptions.preconditions.uid
                return EvictionResult(EvictionOutcome.REPLACED, "Operation cannot be fulfilled: Precondition failed: "
                                      f"UID in precondition: {uid}, UID in object meta: {pod.uid}")
            svc = self._services.get(f"{namespace}/{pod.service}")
            # As the apiserver: pending, finished and deleting pods skip the PDB check.
            if svc and svc.pdb_max_unavailable is not None and pod.phase == "Running" and pod.deleting_at is None:
                budget = self._budget_model(svc)
                if budget.disruptions_allowed <= 0:
                    return EvictionResult(
                        EvictionOutcome.BLOCKED,
                        f"Cannot evict pod as it would violate the pod's disruption budget "
                        f"{budget.name}: {budget.disruptions_allowed} disruptions allowed "
                        f"({budget.current_healthy} healthy, {budget.desired_healthy} needed)",
                    )
            self._terminate(pod, grace_seconds)
            return EvictionResult(EvictionOutcome.EVICTED)

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None,
                   uid: str | None = None) -> None:
        with self._lock:
            self._advance(self._clock())
            pod = self._pods.get(f"{namespace}/{name}")
            if pod is not None and uid is not None and pod.uid != uid:
                raise ConflictError("409: Operation cannot be fulfilled: Precondition failed: "
                                    f"UID in precondition: {uid}, UID in object meta: {pod.uid}")
            if pod is not None:
                self._terminate(pod, grace_seconds)

    def _terminate(self, pod: SimPod, grace_seconds: int | None, replace: bool = True) -> None:
        if pod.deleting_at is not None:
            return
        # The pod leaves its endpoints at once: every session it held is cut.
        self.lost_sessions += len(pod.running) + pod.waiting
        pod.running, pod.waiting = [], 0
        pod.deleting_at = self._t
        if grace_seconds is not None:  # None: the pod's own terminationGracePeriodSeconds
            pod.grace_s = grace_seconds
        svc = self._services.get(f"{pod.namespace}/{pod.service}")
        if not replace:  # scaled down: its ReplicaSet wants one pod fewer
            return
        if svc is not None and pod.owner_kind == "ReplicaSet":
            # The ReplicaSet replaces it at once; the scheduler avoids cordoned nodes.
            replacement = self._create_pod(svc, pod.version, pod.labels["pod-template-hash"], 0)
            replacement.ready_at = self._t + POD_START_S
        elif pod.owner_kind == "Job":
            job = SimPod(
                pod.namespace, f"{pod.labels['job-name']}-{self._suffix(5)}", self._uid(), "",
                "", "", pod.gpu_request, [], self._t, dict(pod.labels), owner_kind="Job",
                has_emptydir=pod.has_emptydir, signal=False,
            )
            self._add_pod(job, self._nodes[pod.node].product if pod.node else A100)

    def pod_uid(self, namespace: str, name: str) -> str | None:
        with self._lock:
            self._advance(self._clock())
            pod = self._pods.get(f"{namespace}/{name}")
            return pod.uid if pod else None

    def set_weights(self, namespace: str, service: str, weights: Mapping[str, int]) -> None:
        """A shortcut for tests: set weights in the service's route object (its splitting rule)."""
        with self._lock:
            key = f"{namespace}/{service}"
            svc = self._services.get(key)
            if svc is None:
                raise WriteError(f'service "{key}" not found')
            route = self._routes.get(key)
            if route is None:
                raise WriteError(f'service "{key}" has no route')
            self._advance(self._clock())
            updated = copy.deepcopy(route)
            shape = demo_kind(svc.router_kind)[0].weights
            assert shape is not None  # demo_kind holds only kinds with weights
            _, split = max(shape.lists(updated["spec"]), key=lambda g: len(g[1]))  # the widest: the split
            for entry in split:
                backend = shape.backend(entry)
                for v in svc.versions:
                    mine = backend.subset == v.name if backend.subset else backend.service == backend_name(svc, v.name)
                    if mine and v.name in weights:
                        entry["weight"] = int(weights[v.name])
            self._store(namespace, service, route, updated)

    # ----- custom resources: GET and PATCH as the apiserver serves them -------------------

    def _find(self, group: str, version: str, plural: str, namespace: str, name: str) -> tuple[str, dict[str, Any]]:
        row = next((k for k in ROUTER_KINDS.values() if k.group == group and k.plural == plural and k.demo), None)
        if row is None or version not in row.versions:
            raise DemoApiError(404, "the server could not find the requested resource")
        kind = row.kind
        route = self._routes.get(f"{namespace}/{name}")
        if route is None or route.get("kind") != kind:
            raise DemoApiError(404, f'{plural}.{group} "{name}" not found')
        return kind, route

    def _diag_jobs(self) -> DemoJobs:
        jobs: DemoJobs | None = getattr(self, "_jobs", None)
        if jobs is None:
            jobs = self._jobs = DemoJobs()
        return jobs

    def create_object(self, group: str, version: str, plural: str, namespace: str, body: dict) -> dict:
        """Only a diagnostic's Job (gputui.ops.diag): it finishes at once, SIMULATED (demo/diag_jobs.py)."""
        if plural == "nodemaintenances":  # its NodeMaintenances are shown, but no operator would act on a new one
            raise DemoApiError(422, "the demo cluster runs no maintenance-operator to take a new NodeMaintenance "
                                    "(SIMULATED); drain with --via cordon")
        if (group, plural) != ("batch", "jobs"):
            raise DemoApiError(404, "the server could not find the requested resource")
        with self._lock:
            return self._diag_jobs().create(namespace, body, self._nodes.get(pinned_node(body)))

    def delete_object(self, group: str, version: str, plural: str, namespace: str, name: str,
                      propagation: str = "Foreground") -> None:
        if (group, plural) == ("batch", "jobs"):
            with self._lock:
                self._diag_jobs().delete(namespace, name)

    def pod_log(self, namespace: str, name: str, container: str = "", limit_bytes: int = 8_000_000) -> str:
        with self._lock:
            return self._diag_jobs().log(namespace, name)[:limit_bytes]

    def get_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict:
        with self._lock:
            if (group, plural) == ("", "nodes"):
                return node_object(self._node(name))
            if (group, plural) == ("batch", "jobs"):
                return self._diag_jobs().get(namespace, name)
            _, route = self._find(group, version, plural, namespace, name)
            out = copy.deepcopy(route)
            out["apiVersion"] = f"{group}/{version}"
            return out

    def list_objects(self, group: str, version: str, plural: str, namespace: str, label_selector: str = "") -> list[dict]:
        if (group, plural) == ("", "pods"):
            with self._lock:
                return self._diag_jobs().pods(namespace, label_selector)
        if (group, plural) == ("apps", "replicasets"):
            return []  # the demo's workloads are Deployments without ReplicaSets, and it has no Argo Rollout
        raise DemoApiError(404, "the server could not find the requested resource")

    def patch_object(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        patch: dict | list, patch_type: str = "merge", subresource: str = "",
    ) -> dict:
        with self._lock:
            if (group, plural, subresource) == ("", "pods", "") and patch_type == "merge":
                return annotate_pod(self, namespace, name, patch)
            if (group, plural, subresource) == ("", "pods", "") and patch_type == "json":
                try:
                    return label_pod(self, namespace, name, patch)
                except DemoApiError as exc:  # read as the live writer reads the apiserver's answer
                    if stale_json_patch(exc.status, patch_type, patch, has_causes=False):
                        raise ConflictError(f'pods "{name}" changed since it was read ({exc})') from None
                    raise
            if (group, plural, subresource, namespace) == ("", "nodes", "", "") and patch_type == "merge":
                return self._patch_node(name, patch)
            if (group, plural, subresource) == ("apps", "deployments", "scale") and patch_type == "merge":
                self._advance(self._clock())
                return scale(self, namespace, name, patch)
            kind, route = self._find(group, version, plural, namespace, name)
            if subresource not in ("", "status"):
                raise DemoApiError(404, "the server could not find the requested resource")
            if patch_type == "merge":
                if not isinstance(patch, dict):
                    raise DemoApiError(400, "json: cannot unmarshal array into Go value of type map[string]interface {}")
                updated = merge_patch(copy.deepcopy(route), patch)
            elif patch_type == "json":
                if not isinstance(patch, list):
                    raise DemoApiError(400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
                try:
                    updated = json_patch(copy.deepcopy(route), patch)
                except DemoApiError as exc:  # read as the live writer reads the apiserver's answer
                    if stale_json_patch(exc.status, patch_type, patch, has_causes=False):
                        raise ConflictError(f'{plural}.{group} "{name}" changed since it was read ({exc})') from None
                    raise
            else:  # custom resources take no strategic merge patch
                raise DemoApiError(
                    415, "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                )
            if not isinstance(updated, dict):
                raise DemoApiError(400, "the patch does not leave an object")
            meta, old_meta = updated.get("metadata") or {}, route["metadata"]
            if meta.get("name") != name or meta.get("namespace", namespace) != namespace:
                raise DemoApiError(400, f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
            if meta.get("resourceVersion", old_meta["resourceVersion"]) != old_meta["resourceVersion"]:
                # A resourceVersion in the patch is a precondition, as the apiserver reads it.
                raise DemoApiError(
                    409, f'Operation cannot be fulfilled on {plural}.{group} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                )
            # The status subresource changes status only; the main resource never changes status.
            if subresource == "status":
                status = updated.get("status")
                updated = copy.deepcopy(route)
                updated["status"] = status
            else:
                updated["status"] = copy.deepcopy(route.get("status"))
                keep = ("uid", "generation", "creationTimestamp", "resourceVersion")
                updated["metadata"] = {**meta, **{k: old_meta[k] for k in keep}}
            problems = validate_route(kind, updated)
            if problems:
                raise DemoApiError(422, f'{kind}.{group} "{name}" is invalid: ' + ", ".join(problems))
            self._advance(self._clock())  # sessions so far arrived under the old weights
            self._store(namespace, name, route, updated)
            out = copy.deepcopy(self._routes[f"{namespace}/{name}"])
            out["apiVersion"] = f"{group}/{version}"
            return out

    def _store(self, namespace: str, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        new["apiVersion"] = old["apiVersion"]
        if new == old:
            return  # the apiserver writes nothing for a no-op patch
        self._resource_version += 1
        meta = new["metadata"]
        meta["resourceVersion"] = str(self._resource_version)
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        self._routes[f"{namespace}/{name}"] = new
