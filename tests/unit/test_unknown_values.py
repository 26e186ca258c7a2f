"""Prometheus oddities (NaN, +Inf, missing) are unknown: drawn as unknown, never as 0, idle or full."""

import math

from gputui.backends.prom import PromConfig, PromSource
from gputui.backends.session_metrics import counts_by_pod as _counts_by_pod
from gputui.present import cells
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod
from gputui.vocabulary.sessions import GONE, UNREADABLE, SessionState


def series(value, **labels):
    return {"metric": labels, "value": [0, value]}


def test_nan_and_inf_gauges_render_as_unknown_not_nan_or_a_full_bar():
    for bad in (math.nan, math.inf, -math.inf):
        assert cells.pct(bad) == "  –" and cells.temp(bad) == "–" and cells.power(bad) == "–"
        assert cells.gib(bad) == "–" and cells.mem_used_total(bad, bad) == "–"
        assert str(cells.bar(bad, 6)) == "······"
    assert "nan" not in cells.pct(math.nan).lower()


def test_a_sparkline_draws_unknown_samples_as_gaps_and_never_crashes():
    assert cells.sparkline([0.0, math.nan, None, 100.0], 4) == "▁··█"
    assert cells.sparkline([math.nan] * 40, 10) == "·" * 10  # the old code raised ValueError here
    assert cells.sparkline([math.inf, 50.0], 2) == "·▄"


def test_dcgm_values_that_are_not_finite_are_dropped_at_the_source():
    """Per node, read from the answer's bytes or through the decoder: the same values, NaN and Inf left out
    (the field stays unknown), and the fast reader steps aside for any other shape rather than misread it."""
    import json

    from gputui.backends.prom_answers import series_by_label, values_by_label

    def body(rows) -> bytes:  # as Prometheus writes it: compact, labels in name order
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}},
                          separators=(",", ":")).encode()

    names = list(PromSource(PromConfig("http://127.0.0.1:1")).host_labels)
    rows = [series("NaN", Hostname="a"), series("+Inf", Hostname="b"), series("42", Hostname="c"),
            series("7.5", hostname="d"), series("-Inf", hostname="e")]
    assert series_by_label(rows, names) == values_by_label(body(rows), names) == {"c": 42.0, "d": 7.5}
    whole = [series(str(i), Hostname=f"n-{i}") for i in range(40)]  # the usual answer: every value finite
    assert values_by_label(body(whole), names) == series_by_label(whole, names) == {f"n-{i}": float(i) for i in range(40)}
    assert values_by_label(body([]), names) == {}
    for other in ([series("1", Hostname="a", job="dcgm")],  # another label: the decoder's turn
                  [series("1", Hostname='we"ird')],  # an escape
                  [series("1", __name__="Hostname:gputui_gpu:count", Hostname="a")]):
        assert values_by_label(body(other), names) is None
        assert series_by_label(other, names) == {"a": 1.0} or 'we"ird' in series_by_label(other, names)
    assert values_by_label(json.dumps({"status": "success", "data": {"resultType": "vector", "result": whole}}).encode(),
                           names) is None  # spaced JSON: another store's spelling


def test_session_values_that_are_not_numbers_are_unreadable_never_zero():
    got = _counts_by_pod([series("NaN", namespace="n", pod="a"), series("3", namespace="n", pod="a"),
                          series("+Inf", namespace="n", pod="b"), series("2", namespace="n", pod="c"),
                          series("1", namespace="n", pod="c"), series("-1", namespace="n", pod="d")])
    assert got == {("n", "a"): UNREADABLE, ("n", "b"): UNREADABLE, ("n", "c"): 3, ("n", "d"): UNREADABLE}
    snap = ClusterSnapshot(0.0, "t", session_counts={("n", "a"): UNREADABLE, ("n", "c"): 0})
    read = snap.sessions(InferencePod("n", "a", "u", "node", session_signal=True))
    assert read.state is SessionState.UNKNOWN and read.live is None
    assert snap.sessions(InferencePod("n", "b", "u", "node")).state is SessionState.NONE
    assert snap.sessions(InferencePod("n", "b", "u", "node", session_signal=True)).state is SessionState.UNKNOWN
    assert snap.sessions(InferencePod("n", "c", "u", "node")).live == 0


def test_a_vanished_session_series_stays_unknown_while_its_pod_exists():
    from types import SimpleNamespace

    from gputui.backends.session_metrics import unknown_sessions, with_vanished

    last = {("n", "a"): 3, ("n", "b"): 2}
    alive = [SimpleNamespace(namespace="n", name="a")]  # b's pod is gone
    fresh = {("n", "c"): 0}
    assert with_vanished(fresh, last, alive) == {("n", "c"): 0, ("n", "a"): GONE}
    assert with_vanished(last, last, alive) is last  # nothing vanished: the same mapping back
    assert unknown_sessions(last) == {("n", "a"): GONE, ("n", "b"): GONE}


def test_a_picker_gauge_from_another_namespace_or_not_a_number_is_not_this_pools():
    from gputui.backends.prom_canary import picker_signals
    from gputui.vocabulary.model import InferenceService, ServiceVersion

    class Rows:
        def __init__(self):
            self.asked = ""

        def query(self, promql):
            self.asked = promql
            return [
                {"metric": {"__name__": "inference_pool_ready_pods", "name": "p-v1", "namespace": "other"}, "value": [0, "9"]},
                {"metric": {"__name__": "inference_pool_ready_pods", "name": "p-v1", "namespace": "llm"}, "value": [0, "2"]},
                {"metric": {"__name__": "inference_pool_average_queue_size", "name": "p-v1"}, "value": [0, "NaN"]},
            ]

    prom = Rows()
    service = InferenceService("llm", "p", (ServiceVersion("v1", 50, backend="p-v1", pool=True),
                                            ServiceVersion("v2", 50, backend="p.v2", pool=True)))
    found = picker_signals(prom, service)
    assert found["p-v1"].ready_pods == 2 and found["p-v1"].queue is None and "p-v2" not in found
    assert 'name=~"p\\\\-v1|p\\\\.v2"' in prom.asked  # escaped for RE2, then for the PromQL string


def test_session_counts_read_from_the_bytes_are_what_the_json_decoder_reads():
    """The plain per-pod answer is read with a regex (a sixth of decoding the JSON at 65,000 pods); it must
    give exactly what the decoder gives, NaN, Inf and negatives unreadable included, and step aside for any
    answer not in the plain shape, rather than misread it."""
    import json

    from gputui.backends.session_metrics import counts_from_body

    def body(series) -> bytes:  # as Prometheus writes it: compact, labels in name order
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}},
                          separators=(",", ":")).encode()

    plain = [series(v, namespace="llm", pod=f"p-{i}") for i, v in enumerate(["3", "0", "NaN", "+Inf", "-1", "2.0"])]
    fast = counts_from_body(body(plain))
    assert fast == _counts_by_pod(plain) and fast[("llm", "p-0")] == 3 and fast[("llm", "p-2")] == UNREADABLE
    assert fast[("llm", "p-4")] == UNREADABLE and fast[("llm", "p-5")] == 2
    assert counts_from_body(body([])) == {}
    whole = [series(str(i % 9), namespace="llm", pod=f"p-{i}") for i in range(50)]  # the usual answer
    assert counts_from_body(body(whole)) == _counts_by_pod(whole) and len(counts_from_body(body(whole))) == 50
    twice = [*whole, series("4", namespace="llm", pod="p-3"), series("NaN", namespace="llm", pod="p-5")]
    assert counts_from_body(body(twice)) == _counts_by_pod(twice)  # a pod's series summed, NaN unreadable
    assert counts_from_body(body(twice))[("llm", "p-3")] == 3 + 4
    assert counts_from_body(body(twice))[("llm", "p-5")] == UNREADABLE
    assert counts_from_body(body(whole).replace(b"p-7", b"p-\xff")) is None  # not UTF-8: the decoder says why
    # Not the plain shape: the decoder's turn (None), never a partial or wrong reading.
    exported = [*plain, series("4", exported_namespace="llm", exported_pod="q")]
    assert counts_from_body(body(exported)) is None
    escaped = [*plain, series("4", namespace="llm", pod='we"ird')]
    assert counts_from_body(body(escaped)) is None
    assert counts_from_body(b'{"status":"error","errorType":"timeout","error":"query timed out"}') is None
    spaced = json.dumps({"status": "success", "data": {"resultType": "vector", "result": plain}}).encode()
    assert counts_from_body(spaced) is None  # another store's spelling of the same JSON
