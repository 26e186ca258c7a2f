"""fast_init builds the same objects as the dataclass's own __init__: defaults, default factories, init=False
fields, positional and keyword arguments, errors; and they stay frozen."""

import dataclasses
import inspect

import pytest

from gputui.base.frozen_init import fast_init
from gputui.vocabulary.model import GpuSummary, InferencePod, Node


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: dict = dataclasses.field(default_factory=dict)
    d: tuple | None = dataclasses.field(default=None, init=False, compare=False)


Fast = fast_init(dataclasses.dataclass(frozen=True, slots=True)(type("Fast", (), {
    "__annotations__": dict(Plain.__annotations__),
    "b": "b", "c": dataclasses.field(default_factory=dict),
    "d": dataclasses.field(default=None, init=False, compare=False)})))


def _values(obj) -> tuple:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


@pytest.mark.parametrize("args, kwargs", [((1,), {}), ((1, "x"), {}), ((), {"a": 1, "c": {"k": 1}}),
                                          ((1,), {"b": "y", "c": {}})])
def test_the_same_values_as_the_dataclass_init(args, kwargs):
    assert _values(Fast(*args, **kwargs)) == _values(Plain(*args, **kwargs))
    one, two = Fast(*args, **kwargs), Fast(*args, **kwargs)
    if "c" not in kwargs:
        assert one.c is not two.c  # a factory's default is made per instance, never shared


def test_the_same_signature_errors_and_frozenness():
    assert str(inspect.signature(Fast.__init__)).replace("_MISSING", "<factory>") \
        .startswith("(self, a, b=")
    with pytest.raises(TypeError):
        Fast()  # a required field missing
    with pytest.raises(TypeError):
        Fast(1, d=(1,))  # an init=False field is no parameter
    with pytest.raises(dataclasses.FrozenInstanceError):
        Fast(1).a = 2
    with pytest.raises(TypeError):
        fast_init(Plain.__mro__[1])  # not a dataclass (object)


def test_the_models_built_per_refresh_are_unchanged_objects():
    """Node, InferencePod and GpuSummary use it: equality, repr and replace() behave as the dataclass's."""
    pod = InferencePod(namespace="ns", name="p", uid="u", node="n", labels={"a": "b"}, restarts=2)
    assert pod.gpu_units == {} and pod.images == () and pod.probes is None
    assert dataclasses.replace(pod, restarts=3).restarts == 3
    assert dataclasses.replace(pod) == pod and "restarts=2" in repr(pod)
    node = Node("n", True, False, "H100", 8, 8, gpu_memory_mib=80)
    assert node.alerts_memo is None and node.labels == {} and node.gpu_memory_mib == 80
    assert GpuSummary(8, util_pct=5.0).mem_total_mib is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.name = "q"  # type: ignore[misc]
