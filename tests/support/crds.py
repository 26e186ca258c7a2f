"""Install the route kinds' (and Istio DestinationRule's) CRDs (schema-less: preserve unknown fields) and wait until served."""

from __future__ import annotations

import json
import time

from kubernetes import client
from kubernetes.client.rest import ApiException

ROUTE_CRDS = {
    "httproutes": ("gateway.networking.k8s.io", "v1", "HTTPRoute"),
    "virtualservices": ("networking.istio.io", "v1", "VirtualService"),
    "destinationrules": ("networking.istio.io", "v1", "DestinationRule"),
}


def install_crd(api: client.ApiClient, plural: str, timeout: float = 30) -> None:
    group, version, kind = ROUTE_CRDS[plural]
    body = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        # Groups under *.k8s.io are protected: the real Gateway API CRDs carry this approval.
        "metadata": {"name": f"{plural}.{group}",
                     "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466"}
                     if group.endswith(".k8s.io") else {}},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": kind + "List"},
            "versions": [{"name": version, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as exc:
        if exc.status != 409:
            raise
    deadline = time.monotonic() + timeout
    custom = client.CustomObjectsApi(api)
    while True:
        try:
            custom.list_cluster_custom_object(group, version, plural, _preload_content=False)
            return
        except ApiException:
            if time.monotonic() > deadline:
                raise AssertionError(f"CRD {plural}.{group} never became served")
            time.sleep(0.2)


def create_custom(api: client.ApiClient, plural: str, namespace: str, body: dict) -> dict:
    group, version, kind = ROUTE_CRDS[plural]
    body = {"apiVersion": f"{group}/{version}", "kind": kind, **body}
    resp = client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, namespace, plural, body, _preload_content=False)
    return json.loads(resp.data)


def get_custom(api: client.ApiClient, plural: str, namespace: str, name: str) -> dict:
    group, version, _ = ROUTE_CRDS[plural]
    resp = client.CustomObjectsApi(api).get_namespaced_custom_object(group, version, namespace, plural, name, _preload_content=False)
    return json.loads(resp.data)
