"""Which pool a GPU node belongs to (../shared/reference/gpu-resources.md, "Node pools"): the first of the
pool labels it carries, the seeds' own `gpu.pool` first, then the clouds' and Karpenter's. Nodes that carry
none are one pool, "(no pool)", so drift and idle figures still compare like with like."""

from __future__ import annotations

from typing import Iterable, Mapping

DEFAULT_POOL_LABELS = ("gpu.pool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup",
                       "kubernetes.azure.com/agentpool", "karpenter.sh/nodepool")
NO_POOL = "(no pool)"


def pool_of(labels: Mapping[str, str], keys: Iterable[str] = DEFAULT_POOL_LABELS) -> str:
    return next((labels[k] for k in keys if labels.get(k)), NO_POOL)
