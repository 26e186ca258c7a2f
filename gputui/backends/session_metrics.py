"""Which series carry each inference engine's live requests, and the PromQL that reads them.

Names checked against each engine's own documentation (../shared/reference/gpu-signals.md):
running requests are in the batch now, waiting ones are queued; a pod's live
sessions are the sum of both. None of the engines labels its series with the
pod: `pod`/`namespace` come from the scrape target (`exported_pod`/
`exported_namespace` with honor_labels off).

An engine whose names are wrong here or in the config exports nothing we read:
its pods then show as *unknown*, never as idle (see model.SessionState).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gputui.backends.prom_answers import plain_columns
from gputui.vocabulary.series_selectors import check_selector
from gputui.vocabulary.sessions import GONE, UNREADABLE, SessionCounts

if TYPE_CHECKING:
    from gputui.backends.kube_objects import PodRecord


@dataclass(frozen=True, slots=True)
class Engine:
    name: str
    running: tuple[str, ...]  # series selectors: a metric name, optionally with label matchers
    waiting: tuple[str, ...]


BUILTIN_ENGINES: tuple[Engine, ...] = (
    Engine("vllm", ("vllm:num_requests_running",), ("vllm:num_requests_waiting",)),
    Engine("sglang", ("sglang:num_running_reqs",), ("sglang:num_queue_reqs",)),
    Engine("tgi", ("tgi_batch_current_size",), ("tgi_queue_size",)),
    Engine("trtllm", ("trtllm_num_requests_running",), ("trtllm_num_requests_waiting",)),
    # Triton: its own gauge counts only requests queued in its scheduler; with the TensorRT-LLM backend
    # the batch manager's gauges add what is in flight. `active` counts every request the batch manager
    # holds (`scheduled`, what the inference gateway's picker reads, only this iteration's): for a drain,
    # over-counting waits a little longer, under-counting cuts a conversation.
    Engine("triton", ('nv_trt_llm_request_metrics{request_type="active"}',),
           ('nv_trt_llm_request_metrics{request_type="waiting"}', "nv_inference_pending_request_count")),
)

def engines(overrides: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> tuple[Engine, ...]:
    """The built-in table with the config's engines on top (same name: replaced; new name: added)."""
    table = {e.name: e for e in BUILTIN_ENGINES}
    for name, spec in (overrides or {}).items():
        table[name] = Engine(name, tuple(map(check_selector, spec.get("running", ()))),
                             tuple(map(check_selector, spec.get("waiting", ()))))
    return tuple(table.values())


NAME_LABEL = "gputui_series"  # where union() keeps a labelled selector's metric name


def _regex(names: Iterable[str]) -> str:
    return "|".join(n.replace(".", "\\\\.") for n in names)


def union(selectors: Iterable[str], extra: str = "") -> str:
    """One vector of every series the selectors name, narrowed by `extra` matchers (e.g. pod=~"a|b").

    Plain names share one `__name__=~` selector. Selectors with matchers are joined with `or`, which drops a
    right-hand series whose labels, its name aside, are a left-hand one's: `q{model!="x"}` beside a plain
    `q_queue` of the same pod would lose the queue. Each such part carries its name in a label of its own
    (label_replace) so that only the very same series, named twice, counts once.
    """
    plain: list[str] = []
    labelled: list[str] = []
    for s in selectors:
        (labelled if "{" in s else plain).append(s)
    parts = []
    tail = f", {extra}" if extra else ""
    if plain:
        parts.append(f'{{__name__=~"{_regex(plain)}"{tail}}}')
    for s in labelled:
        name, inner = s.split("{", 1)
        parts.append(f'label_replace({name}{{{inner.rstrip().rstrip("}")}{tail}}}, "{NAME_LABEL}", "$1", "__name__", "(.+)")')
    # No selector at all (a config that empties an engine's lists): a selector no series matches.
    return " or ".join(parts) if parts else '{__name__="gputui_no_session_metric_configured"}'


BY_POD = "sum by (namespace, pod, exported_namespace, exported_pod)"


def engine_pod(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """The pod an engine's series belongs to: the scrape target's pod/namespace, else the exported_ ones
    (honor_labels off). None when the series names no pod."""
    namespace = labels.get("namespace") or labels.get("exported_namespace")
    pod = labels.get("pod") or labels.get("exported_pod")
    # Label values are text in any store's answer; anything else (a list from a broken proxy) names no pod.
    return (namespace, pod) if isinstance(namespace, str) and isinstance(pod, str) and namespace and pod else None


def query(table: Sequence[Engine], pod_names: Iterable[str] | None = None) -> str:
    """Live requests per pod, running and waiting summed by the store in one query, for every pod or for the
    pods named. The sum is what a pod's sessions are (sessions.PodSessions.live); a NaN in either gauge makes
    it NaN (read as UNREADABLE, so unknown); a gauge the pod does not export adds nothing. One answer of one
    series per pod: at 65,000 pods reading running and waiting apart and merging them was two fifths of
    gputui's steady CPU (issue 18)."""
    selectors = [s for e in table for field in (e.running, e.waiting) for s in field]
    if pod_names is None:
        return f"{BY_POD} ({union(selectors)})"
    names = _regex(sorted(set(pod_names)))
    # The pod label comes from the scrape target, or is kept as exported_pod (honor_labels off).
    by_pod, by_exported = f'pod=~"{names}"', f'exported_pod=~"{names}"'
    return f"{BY_POD} ({union(selectors, by_pod)} or {union(selectors, by_exported)})"


def counts_by_pod(series_list: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """Requests per (namespace, pod), summed over a pod's series, from the API's decoded series."""
    out: dict[tuple[str, str], int] = {}
    for series in series_list:
        try:
            key = engine_pod(series["metric"])
            text = series["value"][1]
        except (KeyError, TypeError, IndexError, AttributeError):
            continue
        if key is not None:  # else no pod to name
            _add(out, key, text)
    return out


_BY_POD = '"namespace":"([^"\\\\]+)","pod":"([^"\\\\]+)"'  # no exported_ labels: the plain per-pod answer


def counts_from_body(body: bytes) -> dict[tuple[str, str], int] | None:
    """counts_by_pod straight from the answer's bytes (prom_answers), when every series in it has the plain
    shape; None when any has another (exported_ labels, escapes, another store's spelling): then the JSON
    decoder reads it. At 65,000 pods, read every refresh, this costs about 0.4x decoding the JSON (benchmarks/answers.py)."""
    found = plain_columns(body, _BY_POD)
    if found is None:
        return None
    keys, values = found
    # The usual answer, each pod once with a whole non-negative count, is read by C loops (map, dict);
    # anything else (a pod twice, NaN, a fraction, a negative) takes the per-series path, which words it.
    try:
        counts = list(map(int, values))
    except ValueError:
        counts = []
    if counts and min(counts) >= 0:
        out = dict(zip(keys, counts, strict=True))
        if len(out) == len(counts):
            return out
    out = {}
    for key, value in zip(keys, values, strict=True):
        _add(out, key, value)
    return out


def _add(out: dict[tuple[str, str], int], key: tuple[str, str], text: Any) -> None:
    """One series' value into its pod's count; UNREADABLE where a value is NaN, +-Inf, negative or not a
    number (the series is there but says nothing: never read as 0). Runs per pod of the fleet each refresh:
    kept plain."""
    try:
        value = int(text)  # Prometheus writes whole numbers without a point; int() is 6x faster
    except (ValueError, TypeError):
        try:
            value = int(float(text))  # NaN raises ValueError, Inf OverflowError
        except (ValueError, TypeError, OverflowError):
            value = UNREADABLE
    before = out.get(key, 0)
    out[key] = UNREADABLE if value < 0 or before == UNREADABLE else before + value


# Across reads: what a failed or partial read means for the counts the last one gave.
def unknown_sessions(sessions: SessionCounts) -> dict:
    """Every pod that had a session series, with no count: after a failed read they are unknown."""
    return dict.fromkeys(sessions, GONE)


def with_vanished(fresh: SessionCounts, last: SessionCounts, pods: Iterable[PodRecord]) -> SessionCounts:
    """The fresh counts, plus every pod whose series was there last time and is gone now (scrape failed,
    target down, series stale) with no count: it was an inference pod, so its count is unknown, not absent.
    Such a key stays while its pod exists."""
    if fresh is last:  # the store said the same as last time (prom_answers.LastAnswers): nothing vanished
        return fresh
    vanished = last.keys() - fresh.keys()
    if not vanished:
        return fresh
    alive = {(p.namespace, p.name) for p in pods}
    out = dict(fresh)
    out.update(dict.fromkeys((k for k in vanished if k in alive), GONE))
    return out
