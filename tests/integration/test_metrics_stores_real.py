"""The backend's metric queries against both stores it must work with: Debian's Prometheus and Debian's
VictoriaMetrics (PromQL-compatible, built for large series counts), each scraping the same exporters. The
figures are compared with what the exporters serve; failures (a store down, one that never answers) are one
line and unknown values, never zeros or stale figures passed off as fresh."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from gputui.backends.base import BackendError
from gputui.backends.prom import PromConfig, PromSource
from tests.support.procs import wait_until
from tests.support.victoria import VictoriaServer

NS = "t-stores"


@pytest.fixture
def store(metrics_store):
    """(name, base URL, the VictoriaMetrics server or None) of a store scraping the session's exporters."""
    if isinstance(metrics_store, VictoriaServer):
        return "victoria-metrics", metrics_store.url, metrics_store
    return "prometheus", metrics_store.url, None


def source(url: str, **kw) -> PromSource:
    return PromSource(PromConfig(url, timeout=kw.pop("timeout", 10), **kw))


def test_fleet_and_per_gpu_figures_are_what_the_exporter_serves(store, dcgm_exporter):
    _name, url, _ = store
    host, _gpu = dcgm_exporter.gpus()[0]
    gpus = [g for h, g in dcgm_exporter.gpus() if h == host]
    for g in gpus:
        dcgm_exporter.set(host, g, util=10 + g, temp=40 + g)
    src = source(url)
    want_util = sum(10 + g for g in gpus) / len(gpus)

    def fleet_sees_it():
        m = src.fetch({host}, per_gpu=False).nodes.get(host)
        return m if m and m.util_pct is not None and abs(m.util_pct - want_util) < 0.01 else None

    summary = wait_until(fleet_sees_it, 20, what="the fleet query to see the values set")
    assert summary.count == len(gpus) and summary.temp_c == 40 + max(gpus)
    # The store's per-node answers are in the plain shape read straight from their bytes, and read the same so.
    import requests

    from gputui.backends.prom_answers import series_by_label, values_by_label

    for promql in (f"max by ({', '.join(src.host_labels)}) (DCGM_FI_DEV_GPU_TEMP)",
                   f"count by ({', '.join(src.host_labels)}) (DCGM_FI_DEV_GPU_UTIL)"):
        body = requests.post(f"{url}/api/v1/query", params={"query": promql}, timeout=10).content
        fast = values_by_label(body, src.host_labels)
        assert fast is not None and fast == series_by_label(json.loads(body)["data"]["result"], src.host_labels)
        assert fast[host] in (40 + max(gpus), len(gpus))
    per_gpu = src.fetch({host}, per_gpu=True, host=host).gpus
    assert {i: s.values.get("util_pct") for (h, i), s in per_gpu.items() if h == host} == {g: 10.0 + g for g in gpus}


def test_sessions_and_the_idle_range_query(store, inference_exporter, dcgm_exporter):
    _name, url, _ = store
    inference_exporter.add_pod(NS, "chat-0", running=7, waiting=2)
    try:
        src = source(url)
        wait_until(lambda: src.sessions().get((NS, "chat-0")) == 9, 20, what="the pod's sessions read")
        # The store's own answer is in the plain shape read straight from its bytes, and reads the same so.
        import requests

        from gputui.backends.session_metrics import counts_by_pod, counts_from_body

        body = requests.post(f"{url}/api/v1/query", params={"query": src.session_query}, timeout=10).content
        fast = counts_from_body(body)
        assert fast is not None and fast == counts_by_pod(json.loads(body)["data"]["result"])
        assert fast[(NS, "chat-0")] == 9
    finally:
        inference_exporter.remove_pod(NS, "chat-0")
    host, gpu = dcgm_exporter.gpus()[0]
    dcgm_exporter.set(host, gpu, util=1)
    dcgm_exporter.assign(host, gpu, NS, "held-idle")
    try:
        from gputui.backends.prom_review import idle_gpus

        src = source(url)
        reading = wait_until(lambda: idle_gpus(src, 3, 5), 20, what="the attributed GPU")
        assert reading.attributed.get(host, 0) == 1  # the one GPU assigned above; no other names a pod
        wait_until(lambda: idle_gpus(src, 3, 5).idle.get(host, 0) == 1, 20, what="the held GPU counted idle")
        # A new holder (a drain's replacement, say) is a new series: not judged before it has held the GPU a
        # whole window (issue 35: idle jumped during drains). Over 30 s it is not idle yet, whatever its mean.
        dcgm_exporter.assign(host, gpu, NS, "replacement")
        wait_until(lambda: "replacement" in requests.post(
            f"{url}/api/v1/query", params={"query": "DCGM_FI_DEV_GPU_UTIL"}, timeout=10).text,
                   20, what="the new holder's series")
        assert idle_gpus(src, 30, 5).idle.get(host, 0) == 0
        wait_until(lambda: idle_gpus(src, 3, 5).idle.get(host, 0) == 1, 20, what="the new holder, held 3 s, idle")
    finally:
        dcgm_exporter.assign(host, gpu, None)


def test_a_store_behind_a_path_prefix_with_a_tenant_header(store, dcgm_exporter):
    """VictoriaMetrics' cluster reads at /select/<account>/prometheus, Mimir wants X-Scope-OrgID: the base URL
    keeps its path and the configured headers go with every query."""
    name, url, _ = store
    # VictoriaMetrics serves the API under /prometheus too, as its cluster version does under
    # /select/<account>/prometheus; Prometheus itself only at its root (and ignores the tenant header).
    prefixed = f"{url}/prometheus" if name == "victoria-metrics" else url
    src = source(prefixed, headers={"X-Scope-OrgID": "team-a"})
    host, _ = dcgm_exporter.gpus()[0]
    assert src.fetch({host}, per_gpu=False).nodes[host].count == len(dcgm_exporter.gpus(host))


def test_a_store_down_or_silent_is_one_line_and_unknown(store, dcgm_exporter):
    _name, url, vm = store
    # One that accepts and never answers: the query times out, as one line that names the timeout that ended it
    # (how long that takes is a figure: benchmarks/reaction_times.py --only silent-store).
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    accepting = threading.Thread(target=lambda: [held.append(silent.accept()[0]) for _ in range(8)], daemon=True)
    accepting.start()
    try:
        with pytest.raises(BackendError) as exc:
            source(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=1.0).fetch({"x"}, per_gpu=False)
        assert "\n" not in str(exc.value)
        # It says how long it waited and what lengthens the wait (a large fleet's busy store needs more).
        assert str(exc.value) == "timed out after 1s (prometheus_timeout)", str(exc.value)
    finally:
        for s in held:
            s.close()
        silent.close()
    if vm is None:
        return  # the session's Prometheus is shared: test_kube_backend stops and restarts it
    vm.stop()
    try:
        with pytest.raises(BackendError) as exc:
            source(url, timeout=2).fetch({"x"}, per_gpu=False)
        assert "\n" not in str(exc.value)
    finally:
        vm.start(ready="DCGM_FI_DEV_GPU_UTIL")


def test_an_answer_that_says_what_the_last_one_said_is_not_read_again_and_a_new_value_is(store, inference_exporter):
    """Sessions are read every refresh but scraped every 10-30 s: most answers repeat the last one, apart from the
    time they were evaluated at. Reading 65,000 pods' counts again cost 0.1 s of CPU per answer (issue 18), so an
    answer that says the same hands back what the last one was read as. A value the store scraped since is read.
    The query names this test's pod alone (as a drain's does): other tests' pods change their counts meanwhile."""
    import requests

    from gputui.backends.prom_answers import values_digest
    from gputui.backends.session_metrics import query as session_query

    _name, url, _ = store
    inference_exporter.add_pod(NS, "same-0", running=3, waiting=1)
    try:
        src = source(url)
        query = session_query(src.cfg.engines, ["same-0"])
        wait_until(lambda: src.query_counts(query).get((NS, "same-0")) == 4, 20, what="the pod's count read")

        # Two answers a moment apart say the same (their evaluation times may differ: the digest leaves them out).
        def repeated():
            first = requests.post(f"{url}/api/v1/query", params={"query": query}, timeout=10).content
            time.sleep(0.01)
            second = requests.post(f"{url}/api/v1/query", params={"query": query}, timeout=10).content
            return first if values_digest(first) == values_digest(second) else None

        assert values_digest(wait_until(repeated, 20, what="two answers that say the same")) is not None
        # The reader's own: the very same object while the store says the same.
        read = wait_until(lambda: (lambda a, b: a if a is b else None)(src.query_counts(query), src.query_counts(query)),
                          20, what="two reads in a row handed the same counts")
        assert read[(NS, "same-0")] == 4
        inference_exporter.set(NS, "same-0", running=5, waiting=0)
        wait_until(lambda: src.query_counts(query).get((NS, "same-0")) == 5, 20, what="the new count read")
        wait_until(lambda: src.sessions().get((NS, "same-0")) == 5, 20, what="the fleet's read of it")
    finally:
        inference_exporter.remove_pod(NS, "same-0")


def test_running_and_waiting_gauges_alike_but_for_their_names_are_both_counted(store, inference_exporter):
    """One query sums a pod's running and waiting gauges. A selector with matchers joins it with `or`, and
    PromQL's `or` drops a right-hand series whose labels, its name aside, are a left-hand one's: the queue
    here would go uncounted, and a drain would cut what it did not count. Both stores count both."""
    from gputui.backends.session_metrics import engines

    _name, url, _ = store
    inference_exporter.add_pod(NS, "mine-0", server="unlisted", running=3, waiting=4)
    try:
        src = source(url, engines=engines({"myengine": {"running": ['myengine_inflight_requests{model!="none"}'],
                                                        "waiting": ["myengine_queued_requests"]}}))
        wait_until(lambda: src.sessions().get((NS, "mine-0")) == 7, 20, what="the pod's running and waiting summed")
        assert src.sessions_for([(NS, "mine-0")]) == {(NS, "mine-0"): 7}
    finally:
        inference_exporter.remove_pod(NS, "mine-0")
