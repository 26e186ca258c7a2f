"""How a node hands out its GPUs (../shared/reference/gpu-resources.md): whole cards, MIG slices (one resource
per profile in the mixed strategy; `nvidia.com/gpu` itself in the single one), time-sliced or MPS replicas
(`nvidia.com/gpu.shared`, or replicas on the plain name), and devices a DRA driver publishes in
ResourceSlices. Resource names are discovered from the node, never listed: a fixed list shows what it does
not know as nothing. A pod asks in the same units (`InferencePod.gpu_requests`), so allocation and the drain's
capacity guard count like for like. Pure: no I/O, no Kubernetes client."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

WHOLE_GPU = "nvidia.com/gpu"  # the device plugin's default resource
GPU_COUNT_LABEL = "nvidia.com/gpu.count"  # GFD: physical GPUs, whatever the slicing
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"  # none | time-slicing | mps
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"  # single | mixed
DEVICE_TAINT_CONDITION = "DRADeviceTaint"  # a node problem gputui makes of a tainted DRA device (its message says it)
DRA_PREFIX = "dra:"  # a DRA driver's devices, named like a resource: "dra:gpu.nvidia.com"


class Scheme(str, Enum):
    WHOLE = "whole"
    MIG = "mig"
    SHARED = "shared"
    DRA = "dra"


@dataclass(frozen=True, slots=True)
class GpuResource:
    """One kind of GPU unit a node offers, and how many."""

    name: str  # the resource name pods request (or dra:<driver>)
    scheme: Scheme
    capacity: int
    allocatable: int
    replicas: int = 1  # shared: units per physical GPU


def is_gpu_resource(name: str) -> bool:
    """An extended resource that hands out a GPU or a piece of one: `<vendor>/gpu…` (nvidia.com/gpu,
    nvidia.com/gpu.shared, amd.com/gpu), `<vendor>/mig-…`, or any resource of a `gpu.` domain
    (gpu.intel.com/i915, gpu.intel.com/xe)."""
    domain, slash, item = name.partition("/")
    if not slash or domain.endswith("kubernetes.io") or domain == "hugepages":
        return False
    return item.startswith(("gpu", "mig-")) or domain.startswith("gpu.")


# A Kubernetes quantity (apimachinery resource.Quantity): a signed decimal number, then a binary suffix (Ki .. Ei),
# a decimal one (n u m "" k M G T P E) or a decimal exponent (e3, E-2).
_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?[0-9]{1,4}))?")
_SUFFIX = {
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50),
    "Ei": Fraction(2**60), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), None: Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15),
    "E": Fraction(10**18),
}
MAX_QUANTITY = 2**63 - 1  # the API's int64 (a larger quantity is no count of anything on a node)


def parse_quantity(text: object) -> Fraction:
    """A Kubernetes quantity's exact value ('80Gi', '500m', '1.5', '2e3', '1k'), or ValueError. Quantities beyond
    ±2^63 and numbers of more than 64 digits are refused, so no text costs more than a few microseconds."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        text = str(text) if abs(text) <= MAX_QUANTITY else "x"
    if not isinstance(text, str) or len(text) > 80:
        raise ValueError(f"{text!r} is not a quantity")
    m = _QUANTITY.fullmatch(text.strip())
    if not m or len(m.group(2)) > 64:
        raise ValueError(f"{text!r} is not a quantity")
    sign, digits, suffix, exponent = m.groups()
    whole, _, fraction = digits.partition(".")
    value = Fraction(int(whole or "0") * 10**len(fraction) + int(fraction or "0"), 10**len(fraction))
    if exponent is not None:
        e = int(exponent)
        if e > 40:  # 10^40 is far past the limit below, whatever the digits
            if value:
                raise ValueError(f"{text!r} is out of range")
        else:
            value *= Fraction(10) ** e
    else:
        value *= _SUFFIX[suffix]
    if abs(value) > MAX_QUANTITY:
        raise ValueError(f"{text!r} is out of range")
    return -value if sign == "-" else value


def quantity(value: object) -> int:
    """A whole-number Kubernetes quantity or label value ('8', '1k', '2Ki', '2000m'); 0 when it is not one or
    not whole (GPUs and weights are counted in whole units; the one parser for both)."""
    # The usual '8' first: this runs per node per refresh. Only plain ASCII digits take the fast path: int()
    # also reads '੧', ' 8 ' and '1_000', which are no quantity.  # noqa: RUF003 - a Gurmukhi digit, on purpose
    if type(value) is int or (type(value) is str and value.isascii() and value.isdigit()):
        n = int(value)
        return n if -MAX_QUANTITY <= n <= MAX_QUANTITY else 0
    elif isinstance(value, float):
        value = int(value) if value.is_integer() and abs(value) <= MAX_QUANTITY else None
    try:
        exact = parse_quantity(value)
    except ValueError:
        return 0
    return int(exact) if exact.denominator == 1 else 0


def _count(value: object) -> int:
    return max(0, quantity(value))


def node_resources(capacity: Mapping[str, object], allocatable: Mapping[str, object],
                   labels: Mapping[str, str]) -> tuple[GpuResource, ...]:
    """The node's GPU resources from its status, each with its scheme (GFD's labels tell shared replicas and
    the MIG single strategy apart from whole cards)."""
    replicas = max(1, _count(labels.get(REPLICAS_LABEL)))
    sharing = labels.get(SHARING_LABEL, "none")
    single_mig = labels.get(MIG_STRATEGY_LABEL) == "single" and "-MIG-" in labels.get("nvidia.com/gpu.product", "")
    out = []
    for name in sorted(set(capacity) | set(allocatable)):
        if not is_gpu_resource(name):
            continue
        item = name.partition("/")[2]
        if item.startswith("mig-") or (single_mig and item == "gpu"):
            scheme, per = Scheme.MIG, 1
        elif item.endswith(".shared") or (item == "gpu" and sharing not in ("", "none") and replicas > 1):
            scheme, per = Scheme.SHARED, replicas
        else:
            scheme, per = Scheme.WHOLE, 1
        cap = _count(capacity.get(name))
        out.append(GpuResource(name, scheme, cap, _count(allocatable.get(name, cap)), per))
    return tuple(r for r in out if r.capacity or r.allocatable)


def physical_gpus(labels: Mapping[str, str], resources: Iterable[GpuResource], dra_devices: int = 0) -> int:
    """Cards in the node: GFD's count when it has one; else whole cards, shared units over their replicas,
    and DRA devices (MIG slices alone do not say how many cards they came from: 0, unknown)."""
    counted = _count(labels.get(GPU_COUNT_LABEL))
    if counted:
        return counted
    total = 0
    for r in resources:
        if r.scheme is Scheme.WHOLE:
            total += r.capacity
        elif r.scheme is Scheme.SHARED:
            total += r.capacity // r.replicas
    return total + dra_devices


def request_units(requests: Mapping[str, object], limits: Mapping[str, object]) -> dict[str, int]:
    """A container's GPU units by resource (an extended resource's request equals its limit; either may be set)."""
    out: dict[str, int] = {}
    for name in set(requests) | set(limits):
        if is_gpu_resource(name):
            n = _count(requests.get(name, limits.get(name)))
            if n:
                out[name] = n
    return out


def allocation_text(resources: Iterable[GpuResource], allocated: Mapping[str, int], physical: int,
                    short: bool = False) -> str:
    """A node's GPUs in a few characters: `3/8` whole cards, `3/7 MIG of 2 GPUs` (every MIG profile together),
    `3/32 ×4 shared`, `1/4 DRA`; several schemes on one node joined with `+`. `short`, for the node table's
    narrow column: `3/7MIG`, `3/32×4`, `1/4DRA`."""
    by_scheme: dict[Scheme, list[GpuResource]] = {}
    for r in resources:
        by_scheme.setdefault(r.scheme, []).append(r)
    parts = []
    for scheme, group in by_scheme.items():
        figure = f"{sum(allocated.get(r.name, 0) for r in group)}/{sum(r.allocatable for r in group)}"
        if scheme is Scheme.MIG:
            figure += "MIG" if short else " MIG" + (f" of {physical} GPU{'s' * (physical != 1)}" if physical else "")
        elif scheme is Scheme.SHARED:
            replicas = max(r.replicas for r in group)
            figure += f"×{replicas}" if short else f" ×{replicas} shared"
        elif scheme is Scheme.DRA:
            figure += "DRA" if short else " DRA"
        parts.append(figure)
    return "+".join(parts) if short else " + ".join(parts) if parts else "0/0"


SCHEMES = (Scheme.WHOLE, Scheme.MIG, Scheme.SHARED, Scheme.DRA)  # GpuUse's order
_MARK = {Scheme.WHOLE: "", Scheme.MIG: "MIG", Scheme.SHARED: "shared", Scheme.DRA: "DRA"}


@dataclass(frozen=True, slots=True)
class GpuUse:
    """GPU units in use and offered, apart per scheme (in SCHEMES' order): a MIG slice or a shared replica is
    not a GPU, so no figure adds them to whole cards. A node's, a cluster's or a fleet's (they add up)."""

    in_use: tuple[int, ...] = (0, 0, 0, 0)
    offered: tuple[int, ...] = (0, 0, 0, 0)

    @classmethod
    def of_node(cls, resources: Iterable[GpuResource], allocatable: int, allocated: Mapping[str, int]) -> GpuUse:
        """A node's: per resource, its units allocated (never above what it offers) and offered. A node whose
        resources were not told apart (`allocatable` alone) offers whole cards."""
        in_use, offered = [0, 0, 0, 0], [0, 0, 0, 0]
        resources = tuple(resources)
        if not resources:
            return cls((min(sum(allocated.values()), allocatable), 0, 0, 0), (allocatable, 0, 0, 0))
        for r in resources:
            i = SCHEMES.index(r.scheme)
            in_use[i] += min(allocated.get(r.name, 0), r.allocatable)
            offered[i] += r.allocatable
        return cls(tuple(in_use), tuple(offered))

    def __add__(self, other: GpuUse) -> GpuUse:
        return GpuUse(tuple(map(int.__add__, self.in_use, other.in_use)),
                      tuple(map(int.__add__, self.offered, other.offered)))

    def shown(self) -> list[tuple[str, int, int]]:
        """(mark, in use, offered) of the schemes to show: whole cards ("") always, the others where something
        is offered or in use."""
        return [(_MARK[scheme], self.in_use[i], self.offered[i]) for i, scheme in enumerate(SCHEMES)
                if i == 0 or self.offered[i] or self.in_use[i]]

    def text(self, short: bool = False) -> str:
        """`7/16`; with other schemes `7/16+3/14MIG+5/32shared+1/4DRA` (as the node table's GPU column), or
        `short` (a narrow header) `7/16+`: whole cards, and a mark that there is more than cards."""
        return _joined([f"{used}/{offered}{mark}" for mark, used, offered in self.shown()], short)

    def free_text(self, short: bool = False) -> str:
        """Units offered and not in use, per scheme: `9`, or `9+11MIG+26shared+2DRA`; `short`: `9+`."""
        return _joined([f"{max(0, offered - used)}{mark}" for mark, used, offered in self.shown()], short)

    def to_dict(self) -> dict[str, dict[str, int]]:
        """Per scheme shown (whole cards always): units allocated and offered, for JSON."""
        return {scheme.value: {"allocated": self.in_use[i], "offered": self.offered[i]}
                for i, scheme in enumerate(SCHEMES) if i == 0 or self.offered[i] or self.in_use[i]}


def _joined(parts: list[str], short: bool) -> str:
    """Each scheme's figure (whole cards first, unmarked), or `short`: whole cards and a "+" when more follow."""
    return parts[0] + ("+" if len(parts) > 1 else "") if short else "+".join(parts)


def holders(resources: Iterable[GpuResource], pods: Iterable[tuple[str, Mapping[str, int]]],
            allocated: Mapping[str, int], names: int = 2) -> list[str]:
    """One line per resource for a node's detail: its units in use, offered, and the pods holding them (pod
    name, units), e.g. `nvidia.com/mig-1g.10gb  3/7  chat-0 ×2, chat-1 ×1`. Past `names` pods the rest are
    counted (`+3 more`), so a slice shared by many pods stays one line (the pods table lists them all)."""
    lines = []
    pods = list(pods)
    for r in resources:
        held = [f"{name} ×{units[r.name]}" for name, units in pods if units.get(r.name)]
        if len(held) > names:
            held = [*held[:names], f"+{len(held) - names} more"]
        kind = {Scheme.MIG: "MIG", Scheme.SHARED: f"shared ×{r.replicas}", Scheme.DRA: "DRA"}.get(r.scheme, "")
        lines.append(f"{r.name}{f' ({kind})' if kind else ''}  {allocated.get(r.name, 0)}/{r.allocatable}"
                     + (f"  {', '.join(held)}" if held else "  free"))
    return lines
