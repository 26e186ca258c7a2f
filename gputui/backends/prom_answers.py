"""Instant-vector answers read straight from their bytes, when every series in them has the one plain shape
Prometheus and VictoriaMetrics write for a known set of labels; None otherwise, and the JSON decoder reads
the answer as usual.

At 65,000 nodes a fleet read is six answers of one series per node, and decoding them (a dict per series,
then a walk over those in Python) was the largest single cost of a refresh (issue 18). The plain shape is
compact JSON with labels in name order and no escapes: quotes inside a JSON string are always escaped, so
the pattern's quotes can only be the answer's own structure, and a count of series that does not match the
count of matches means some series had another shape.
"""

from __future__ import annotations

import re
from functools import lru_cache
from math import isfinite
from typing import Any, Iterable, Mapping, Sequence

ANSWER = b'{"status":"success","data":{"resultType":"vector","result":['
_SERIES = '{"metric":'
_VALUE = r'\},"value":\[[^,\]]*,"([^"\\]*)"\]\}'


@lru_cache(maxsize=16)
def _pattern(labels: str) -> re.Pattern[str]:
    return re.compile(r'\{"metric":\{' + labels + _VALUE)


def plain_rows(body: bytes, labels: str) -> list | None:
    """Each series' captured label values and its value text, in order. `labels` is the regex of the metric
    object's inside, one group per label wanted (e.g. '"namespace":"([^"\\\\]+)","pod":"([^"\\\\]+)"').
    None when the body is not a plain answer of exactly that shape."""
    if not body.startswith(ANSWER):
        return None
    try:
        text = body.decode()  # once: the matches are str, not a decode per label
    except UnicodeDecodeError:
        return None
    found = _pattern(labels).findall(text)
    return found if len(found) == text.count(_SERIES) else None


def values_by_label(body: bytes, names: Sequence[str]) -> dict[str, float] | None:
    """label value -> value for an answer aggregated by one label (each series carries exactly one of
    `names`, e.g. a node's Hostname); a value that is NaN, infinite or not a number is left out (the field
    stays unknown). None when the body is not such an answer."""
    either = "|".join(re.escape(n) for n in names)
    found = plain_rows(body, f'"(?:{either})":"([^"\\\\]+)"')
    if found is None:
        return None
    if not found:
        return {}
    keys, texts = zip(*found)
    try:
        values = list(map(float, texts))
    except ValueError:
        values = [_number(t) for t in texts]
    if all(map(isfinite, values)):  # the usual answer: C loops throughout
        return dict(zip(keys, values))
    return {k: v for k, v in zip(keys, values) if isfinite(v)}


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


def series_by_label(series_list: Iterable[Mapping[str, Any]], names: Sequence[str]) -> dict[str, float]:
    """values_by_label for series the JSON decoder read (any shape): the first of `names` a series carries
    is its key; a series with none, or whose value is NaN, infinite or not a number, is left out."""
    out: dict[str, float] = {}
    for series in series_list:
        try:
            value = float(series["value"][1])
            labels = series["metric"]
            key = next((labels[n] for n in names if labels.get(n)), None)
        except (KeyError, ValueError, TypeError, IndexError, AttributeError):
            continue
        if key and isfinite(value):
            out[key] = value
    return out
