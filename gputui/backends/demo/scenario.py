"""The demo cluster's scenario: its GPU models, its 27 nodes (one with drift, one with an XID, one mid-upgrade,
one whose driver upgrade failed, one NotReady; one in MIG slices, one time-sliced, one handing out its GPUs
through DRA claims; a pool label per GPU family; GPU faults, issue 37 item 6: an application XID, a hardware XID
on a GPU a pod holds, rising row remaps, thermal throttling), its eight inference services, and the simulated
objects that hold their state (every service but codellama has a serving label: router.py)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gputui.vocabulary.gpu_resources import DRA_PREFIX, MIG_STRATEGY_LABEL, REPLICAS_LABEL, SHARING_LABEL, WHOLE_GPU
from gputui.vocabulary.model import Condition, PodProbes
from gputui.vocabulary.scheduling import Taint

STEP_S = 1.0  # simulation tick
HISTORY_S = 600  # sparkline history kept per GPU
SAMPLE_EVERY_S = 3  # GPU sampling period while catching up
MAX_CATCH_UP_STEPS = 900  # after a long pause, skip ahead instead of replaying
WARM_UP_S = 180  # history and sessions exist from the first frame
POD_START_S = 40.0  # model load time of a replacement pod
DEFAULT_GRACE_S = 30
FINISHED_KEPT_S = 600.0  # how far back a pod's finished requests are kept: the longest window a rate is read over

DRIVER = "550.127.05"
OLD_DRIVER = "535.183.01"
CUDA = "12.4"
# What every node's status says of its software (the version matrix's node columns), and the engines' tag.
NODE_INFO = {"kubeletVersion": "v1.33.5", "containerRuntimeVersion": "containerd://1.7.27",
             "kernelVersion": "6.8.0-1031-nvidia", "osImage": "Ubuntu 22.04.5 LTS"}
ENGINE = "v0.9.0"

# The route kinds the demo serves are the table's kinds with a demo form (gputui.vocabulary.router_kinds), in their versions.
BACKEND_PORT = 8000


@dataclass(frozen=True)
class Product:
    label: str  # nvidia.com/gpu.product (spaces become dashes)
    model_name: str
    count: int
    mem_mib: int
    idle_w: float
    max_w: float
    family: str


# How a node hands out its cards: per physical GPU, the resource it is offered as and how many units of it.
# Whole cards are one unit each; a MIG card in the mixed strategy is its profile's slices; a time-sliced card is
# its replicas; DRA devices are whole cards a claim holds (no container asks for them).
MIG_3G = "nvidia.com/mig-3g.40gb"
MIG_1G = "nvidia.com/mig-1g.10gb"
SHARED = "nvidia.com/gpu.shared"
DRA_GPU = DRA_PREFIX + "gpu.nvidia.com"
SHARED_REPLICAS = 4


H100 = Product("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 8, 81559, 72.0, 700.0, "hopper")
A100 = Product("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 8, 81920, 55.0, 400.0, "ampere")
L40S = Product("NVIDIA-L40S", "NVIDIA L40S", 4, 46068, 35.0, 350.0, "ada-lovelace")


@dataclass
class SimNode:
    name: str
    product: Product
    driver: str = DRIVER
    ready: bool = True
    unschedulable: bool = False
    upgrade_state: str = ""
    temp_offset: float = 0.0
    bad_gpus: dict[int, int] = field(default_factory=dict)  # index -> XID
    conditions: list[Condition] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    uuids: list[str] = field(default_factory=list)
    history: dict[int, deque[tuple[float, float | None]]] = field(default_factory=dict)  # (time, util %; None: no sample)
    holders: dict[int, list[tuple[str, bool]]] = field(default_factory=dict)  # GPU -> [(pod uid, ready)] holding it
    version: int = 1  # as a resourceVersion: bumped by every annotation write (the drain lease's precondition)
    # (resource, physical GPU) per unit the node offers, in order; a pod holds unit indices. Whole cards by default,
    # where unit i is GPU i.
    units: list[tuple[str, int]] = field(default_factory=list)
    scheme_labels: dict[str, str] = field(default_factory=dict)  # what GFD says of its slicing
    taints: tuple[Taint, ...] = ()  # its own beyond a cordon's and NotReady's (which follow its state)
    labels: dict[str, str] = field(default_factory=dict)  # other actors' (actors.py), beyond GFD's and the pool's
    # Faults of GPUs that still answer (issue 37 item 6): index -> XID (the GPU reads on and stays allocatable),
    # the clock event reasons every GPU of the node reports (0: the node's exporter does not serve them), and index ->
    # (uncorrectable rows remapped when the simulation began, seconds per new one: the count rises over ticks).
    gpu_xids: dict[int, int] = field(default_factory=dict)
    throttle: int = 0
    remaps: dict[int, tuple[int, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.units:
            self.units = [(WHOLE_GPU, i) for i in range(self.product.count)]

    def offered(self) -> dict[str, tuple[int, int]]:
        """resource -> (capacity, allocatable): units on a GPU fallen off the bus are not allocatable."""
        out: dict[str, tuple[int, int]] = {}
        for resource, gpu in self.units:
            cap, alloc = out.get(resource, (0, 0))
            out[resource] = (cap + 1, alloc + (gpu not in self.bad_gpus))
        return out


def _sliced(product: Product, layout: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Units from one (resource, units per card) per physical GPU."""
    return [(resource, gpu) for gpu, (resource, per) in enumerate(layout) for _ in range(per)]


@dataclass
class _SimVersion:
    name: str
    replicas: int
    weight: int | None  # the route's weight at start; afterwards the route object holds it


@dataclass
class SimService:
    namespace: str
    name: str
    product: Product
    gpus_per_pod: int
    versions: list[_SimVersion]
    router_kind: str
    arrivals_per_s: float
    mean_session_s: float
    max_running: int  # per pod; more arrivals queue
    weights_gb: float  # model weights per GPU
    pdb_max_unavailable: int | None = 1  # None: no PodDisruptionBudget at all
    # What its pods' specs say (gputui check reads it); the defaults are a well-kept service.
    probes: PodProbes = field(default_factory=lambda: PodProbes(True, False, 900, True))
    grace_s: int = DEFAULT_GRACE_S
    restarts: int = 0  # of its first pod: a restart loop
    resource: str = WHOLE_GPU  # what its pods ask for (DRA: devices its ResourceClaims are allocated)
    # Its pods and its Services carry a serving label its Deployments do not select on: a drain can take one
    # pod out of rotation (router.py). Without it, new sessions keep reaching a pod being drained.
    serving_label: bool = True


@dataclass
class SimPod:
    namespace: str
    name: str
    uid: str
    node: str
    service: str
    version: str
    gpu_request: int
    gpu_indices: list[int]  # the node's units it holds (see SimNode.units)
    ready_at: float
    labels: dict[str, str]
    owner_kind: str = "ReplicaSet"
    has_emptydir: bool = False
    deleting_at: float | None = None
    grace_s: float = DEFAULT_GRACE_S
    running: list[tuple[float, float]] = field(default_factory=list)  # running sessions, (ends at, began at): a heap
    # Its engine's finished requests, (ended at, seconds held), oldest first: what its request counter and its
    # end-to-end latency histogram count (review.arrivals reads them as Prometheus would).
    finished: deque[tuple[float, float]] = field(default_factory=deque)
    waiting: int = 0
    phase: str = "Running"
    signal: bool = True  # exports a session metric
    busy: bool = True  # a pod of no service: a training job keeps its GPUs busy, a forgotten notebook does not
    gpus_unrequested: bool = False  # sees GPUs by NVIDIA_VISIBLE_DEVICES without requesting any
    restarts: int = 0
    annotations: dict[str, str] = field(default_factory=dict)
    resource: str = WHOLE_GPU

    def ready(self, t: float) -> bool:
        return self.deleting_at is None and t >= self.ready_at and bool(self.node)


def demo_fleet() -> list[SimNode]:
    nodes = [SimNode(f"gpu-h100-{i:02d}", H100) for i in range(1, 11)]
    nodes += [SimNode(f"gpu-a100-{i:02d}", A100) for i in range(1, 9)]
    nodes += [SimNode(f"gpu-l40s-{i:02d}", L40S) for i in range(1, 7)]
    by_name = {n.name: n for n in nodes}
    xid = by_name["gpu-h100-07"]
    xid.bad_gpus = {5: 79}
    xid.conditions = [Condition("SysLogsXIDError", "True", "XID79", "GPU has fallen off the bus")]
    by_name["gpu-h100-04"].temp_offset = 31.0  # a blocked air intake
    _fault_stories(by_name)
    by_name["gpu-a100-05"].driver = OLD_DRIVER
    failed = by_name["gpu-a100-08"]  # cordoned by the GPU Operator, its driver upgrade failed
    failed.unschedulable = True
    failed.upgrade_state = "upgrade-failed"
    upgrading = by_name["gpu-l40s-03"]
    upgrading.unschedulable = True
    upgrading.upgrade_state = "pod-restart-required"
    by_name["gpu-l40s-06"].ready = False
    # One node per way of handing GPUs out beyond whole cards.
    mig = SimNode("gpu-a100-09", A100, scheme_labels={MIG_STRATEGY_LABEL: "mixed"})
    mig.units = _sliced(A100, [(MIG_3G, 2)] * 4 + [(MIG_1G, 7)] * 4)
    shared = SimNode("gpu-l40s-07", L40S, scheme_labels={REPLICAS_LABEL: str(SHARED_REPLICAS),
                                                          SHARING_LABEL: "time-slicing"})
    shared.units = _sliced(L40S, [(SHARED, SHARED_REPLICAS)] * L40S.count)
    dra = SimNode("gpu-h100-11", H100)
    dra.units = _sliced(H100, [(DRA_GPU, 1)] * H100.count)
    return [*nodes, mig, shared, dra]


# The demo's GPU fault stories (issue 37 item 6), on nodes no other story uses. The demo's dcgm-exporter serves
# the XID and the three row-remap fields of its default counters CSV plus ROW_REMAP_PENDING on every node, and the
# clock event reasons on the thermal node alone (its exporter was given them while its cooling is investigated).
# ECC and NVLink errors stay commented out, as in the default CSV, and the PCIe replay counter is left out too:
# all "not collected", which `gputui check` names. (A PCIe or throttle column on every node would push the node
# detail's Health and history off an 80-column screen: node_detail shows a column per figure any GPU reports.)
APP_XID_NODE, APP_XID_GPU, APP_XID = "gpu-a100-04", 3, 13  # the fine-tuning job's own fault: tell its owner
HW_XID_NODE, HW_XID_GPU, HW_XID = "gpu-h100-05", 6, 79  # falls off the bus under a qwen2-72b pod (GPUs 4-7)
REMAP_NODE, REMAP_GPU = "gpu-h100-03", 2  # under a llama-3-70b pod (GPUs 0-3)
REMAPS_AT_START, REMAP_EVERY_S = 2, 90.0  # one more uncorrectable row remapped every 90 simulated seconds
THERMAL_NODE = "gpu-h100-06"  # a failed fan: every GPU hot, hardware and software thermal slowdown
THERMAL_OFFSET_C = 34.0
THERMAL_MASK = 0x20 | 0x40  # SwThermalSlowdown | HwThermalSlowdown (gpu_metrics.THROTTLE_REASONS)


def _fault_stories(by_name: dict[str, SimNode]) -> None:
    """Faults that do not change placement; the hardware XID comes after it (fail_after_placement)."""
    by_name[APP_XID_NODE].gpu_xids = {APP_XID_GPU: APP_XID}
    by_name[REMAP_NODE].remaps = {REMAP_GPU: (REMAPS_AT_START, REMAP_EVERY_S)}
    thermal = by_name[THERMAL_NODE]
    thermal.temp_offset = THERMAL_OFFSET_C
    thermal.throttle = THERMAL_MASK


def fail_after_placement(by_name: dict[str, SimNode]) -> None:
    """The hardware XID strikes a GPU a pod already holds: the pod keeps it (a drain of that GPU moves it), the
    device plugin stops offering it."""
    by_name[HW_XID_NODE].bad_gpus = {HW_XID_GPU: HW_XID}


def demo_services() -> list[SimService]:
    return [
        SimService(
            "llm", "llama-3-70b-instruct", H100, 4,
            [_SimVersion("v1", 7, 90), _SimVersion("v2", 1, 10)],
            "HTTPRoute", 2.6, 70.0, 48, 36.0,
        ),
        SimService(
            "llm", "qwen2-72b", H100, 4, [_SimVersion("v3", 5, None)],
            "", 1.4, 90.0, 48, 38.0,
        ),
        SimService(
            "llm", "mistral-7b", A100, 1,
            [_SimVersion("stable", 6, 80), _SimVersion("canary", 2, 20)],
            "VirtualService", 1.8, 35.0, 32, 15.0, pdb_max_unavailable=2,
        ),
        SimService(
            "llm", "codellama-34b", A100, 2, [_SimVersion("v1", 5, None)],
            "", 0.6, 120.0, 24, 34.0,
            # Planted for gputui check: no memory limit, liveness that kills a 34B model still loading (hence
            # a pod in a restart loop), no PodDisruptionBudget, and no serving label (its Service selects only
            # what its Deployment does: no label can take a pod out of rotation).
            probes=PodProbes(True, False, 60, False), restarts=7, pdb_max_unavailable=None, serving_label=False,
        ),
        SimService(
            "embeddings", "bge-large", L40S, 1, [_SimVersion("v1.5", 4, None)],
            "", 9.0, 0.6, 64, 1.4,
            # Planted: its readiness probe is its liveness probe, and 10 s of grace cut what is in flight.
            probes=PodProbes(True, True, 900, True), grace_s=10,
        ),
        # On the MIG node: a small model in one 3g.40gb slice per pod (weights per unit, not per card).
        SimService(
            "llm", "llama-3-8b-instruct", A100, 1, [_SimVersion("v1", 5, None)],
            "", 1.2, 25.0, 16, 16.0, resource=MIG_3G,
        ),
        # On the time-sliced node: embeddings sharing cards, four pods to a card at most.
        SimService(
            "embeddings", "gte-base", L40S, 1, [_SimVersion("v1", 6, None)],
            "", 4.0, 0.5, 32, 0.4, resource=SHARED,
        ),
        # On the DRA node: two devices per pod, allocated to its ResourceClaim.
        SimService(
            "llm", "deepseek-r1-distill-70b", H100, 2, [_SimVersion("v1", 3, None)],
            "", 0.5, 150.0, 24, 36.0, resource=DRA_GPU,
        ),
    ]
