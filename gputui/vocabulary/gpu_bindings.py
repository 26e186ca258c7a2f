"""Which pods hold which GPU of one node, as a single-GPU drain needs it (issue 37 item 3): each GPU by its
DCGM index and UUID, and its DRA device when DRA hands it out, with the pods bound to it; and, per source, why
it could not be read (its pods are then unknown, never "on no GPU"). Read by each backend's reader
(gputui.backends.gpu_bindings for the live sources, the demo's own map for the simulated cluster)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BoundGpu:
    """One GPU of the node: DCGM's index and UUID, its DRA device ("driver/pool/device") when DRA hands it
    out, and the pods ("namespace/name") bound to it."""

    index: int | None
    uuid: str = ""
    device: str = ""
    pods: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class GpuBindings:
    gpus: tuple[BoundGpu, ...] = ()
    dcgm: str = ""  # "": DCGM's attribution was read; else why it is unknown
    dra: str = ""  # "": the claims were read (or the cluster serves no DRA); else why unknown
    dra_devices: bool = False  # the node's GPUs are DRA devices (a ResourceSlice of a GPU driver names it)

    @property
    def attributed(self) -> frozenset[str]:
        return frozenset(k for g in self.gpus for k in g.pods)
