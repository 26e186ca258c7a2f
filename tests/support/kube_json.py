"""Kubernetes objects as the API serves them (JSON), small and valid, for the pure join's tests."""


def node_json(name, gpus=8, alloc=None, driver="550.127.05", unschedulable=False, ready=True, labels=None, conditions=()):
    return {
        "metadata": {"name": name, "uid": name, "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
            "nvidia.com/cuda.driver-version.full": driver, **(labels or {})},
            "annotations": {"gputui.io/drain-phase": "waiting", "other": "x"}},
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus)}, "allocatable": {"nvidia.com/gpu": str(gpus if alloc is None else alloc)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}, *conditions],
        },
    }


def pod_json(name, node, gpus=1, labels=None, phase="Running", ns="llm", owner="ReplicaSet"):
    return {
        "metadata": {"name": name, "namespace": ns, "uid": name + "-uid", "labels": labels or {},
                     "ownerReferences": [{"kind": owner, "name": "rs", "controller": True}]},
        "spec": {"nodeName": node, "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}, {}],
                 "volumes": [{"name": "cache", "emptyDir": {}}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"restartCount": 2}, {"restartCount": 1}]},
    }


def deployment_json(name, version, replicas=2, available=2, gpus=1, service="llama"):
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "llm", "generation": 3, "annotations": {"deployment.kubernetes.io/revision": "4"}},
        "spec": {"replicas": replicas, "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": service, "app.kubernetes.io/version": version}},
            "spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}},
        "status": {"observedGeneration": 3, "replicas": replicas, "updatedReplicas": replicas,
                   "readyReplicas": available, "availableReplicas": available},
    }
