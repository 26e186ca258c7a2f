"""A drain's closing line counts in words a person reads: one pod, two pods."""

from gputui.ops.drain.report import DrainReport, Outcome


def test_the_report_says_one_pod_not_one_pods():
    one = DrainReport("n1", Outcome.DRAINED, evicted=1, pauses=1, unknown_cut_pods=1)
    assert one.describe() == ("n1: drained, 1 pod evicted, 1 pod evicted with sessions unknown (possibly cut), "
                              "paused 1 time (API or metrics failures, retried)")
    two = DrainReport("n1", Outcome.DRAINED, evicted=2, pauses=3)
    assert two.describe() == "n1: drained, 2 pods evicted, paused 3 times (API or metrics failures, retried)"


def test_pods_replaced_under_their_name_are_counted_and_named_after_the_others():
    """A StatefulSet's pod replaced before its eviction: the new pod was not evicted (the UID precondition), and
    the report says which (kills the replaced clause's `+=` turned `=` or `-=`, and its joiner)."""
    report = DrainReport("n1", Outcome.UNFINISHED, evicted=1, held=["llm/c: sessions unknown"],
                         replaced=["llm/kv-0 (uid u-1, now u-2)", "llm/kv-1 (uid u-3, now u-4)"])
    assert report.describe() == (
        "n1: unfinished, 1 pod evicted, 1 left in place (llm/c: sessions unknown), 2 replaced under its name before "
        "its eviction, the new pod not evicted (llm/kv-0 (uid u-1, now u-2); llm/kv-1 (uid u-3, now u-4))")
