"""A drain's closing line counts in words a person reads: one pod, two pods."""

from gputui.ops.drain.report import DrainReport, Outcome


def test_the_report_says_one_pod_not_one_pods():
    one = DrainReport("n1", Outcome.DRAINED, evicted=1, pauses=1, unknown_cut_pods=1)
    assert one.describe() == ("n1: drained, 1 pod evicted, 1 pod evicted with sessions unknown (possibly cut), "
                              "paused 1 time (API or metrics failures, retried)")
    two = DrainReport("n1", Outcome.DRAINED, evicted=2, pauses=3)
    assert two.describe() == "n1: drained, 2 pods evicted, paused 3 times (API or metrics failures, retried)"
