from gputui.vocabulary.gpu_resources import (
    GpuResource,
    GpuUse,
    Scheme,
    allocation_text,
    holders,
    node_resources,
    physical_gpus,
)


def test_schemes_are_told_apart_by_name_and_gfd_labels():
    shared = node_resources({"nvidia.com/gpu": "16"}, {"nvidia.com/gpu": "16"},
                            {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    assert shared == (GpuResource("nvidia.com/gpu", Scheme.SHARED, 16, 16, 4),)
    assert physical_gpus({}, shared) == 4
    mig = node_resources({"nvidia.com/mig-1g.10gb": "7", "cpu": "64", "amd.com/gpu": "0"}, {}, {})
    assert [(r.name, r.scheme) for r in mig] == [("nvidia.com/mig-1g.10gb", Scheme.MIG)]
    assert physical_gpus({}, mig) == 0  # slices alone do not say how many cards: unknown
    assert allocation_text(mig, {"nvidia.com/mig-1g.10gb": 3}, 1) == "3/7 MIG of 1 GPU"
    assert allocation_text(shared, {"nvidia.com/gpu": 5}, 4, short=True) == "5/16×4"


def test_holders_name_a_few_pods_and_count_the_rest():
    res = (GpuResource("nvidia.com/mig-3g.40gb", Scheme.MIG, 8, 8),)
    pods = [(f"chat-{i}", {"nvidia.com/mig-3g.40gb": 1}) for i in range(5)]
    (line,) = holders(res, pods, {"nvidia.com/mig-3g.40gb": 5})
    assert line == "nvidia.com/mig-3g.40gb (MIG)  5/8  chat-0 ×1, chat-1 ×1, +3 more"
    (free,) = holders(res, [], {})
    assert free.endswith("0/8  free")


def test_gpu_use_keeps_each_scheme_apart_and_adds_up_like_for_like():
    mig = GpuResource("nvidia.com/mig-1g.10gb", Scheme.MIG, 14, 14)
    shared = GpuResource("nvidia.com/gpu.shared", Scheme.SHARED, 32, 32, replicas=4)
    plain = GpuUse.of_node((), 8, {"nvidia.com/gpu": 3})  # resources not told apart: whole cards
    sliced = GpuUse.of_node((mig, shared), 46, {mig.name: 20, shared.name: 5})  # over-allocated: capped
    assert (plain.text(), plain.text(short=True)) == ("3/8", "3/8")
    assert (plain + sliced).text() == "3/8+14/14MIG+5/32shared"
    assert (plain + sliced).text(short=True) == "3/8+"  # the cards, and a mark that there is more
    assert GpuUse().text() == "0/0" and sum([plain, plain], GpuUse()).in_use == (6, 0, 0, 0)
