"""CPU to read one large Prometheus answer: straight from its bytes (prom_answers) against the JSON decoder.

A 65,000-node fleet's refresh reads one per-pod session answer (every refresh, as the counts move at every
scrape) and five per-node DCGM answers (at each DCGM read), each one series per pod or node, in the plain
shape Prometheus writes. Printed per answer: the median of --repeat reads, and the ratio to decoding the same
answer with json.loads and reading the decoded series (the path an answer of any other shape takes).

    python benchmarks/answers.py [--series 65000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.backends.prom_answers import series_by_label, values_by_label
from gputui.backends.session_metrics import counts_by_pod, counts_from_body

HOSTS = ["Hostname", "hostname"]


def answer(series: list[dict[str, Any]]) -> bytes:
    """As Prometheus writes an instant query's answer: compact, labels in name order."""
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}},
                      separators=(",", ":")).encode()


def median_ms(read: Callable[[], object], repeat: int) -> float:
    read()
    times = []
    for _ in range(repeat):
        started = time.process_time()
        read()
        times.append(time.process_time() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=65000)
    parser.add_argument("--repeat", type=int, default=15)
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("answers", settings_of(args))
    rng = random.Random(4)
    stamp = 1796244926.271
    sessions = answer([{"metric": {"namespace": "scale", "pod": f"llm-{i:05d}"}, "value": [stamp, str(rng.randint(0, 11))]}
                       for i in range(args.series)])
    util = answer([{"metric": {"Hostname": f"gpu-node-{i:05d}"}, "value": [stamp, repr(rng.random() * 100)]}
                   for i in range(args.series)])
    cases = [
        ("sessions per pod", sessions, lambda b: counts_from_body(b), lambda b: counts_by_pod(json.loads(b)["data"]["result"])),
        ("DCGM figure per node", util, lambda b: values_by_label(b, HOSTS),
         lambda b: series_by_label(json.loads(b)["data"]["result"], HOSTS)),
    ]
    print(f"{args.series} series per answer, median of {args.repeat} reads (CPU time)")
    for (name, body, fast, decoded), short in zip(cases, ("sessions", "DCGM"), strict=True):
        assert fast(body) == decoded(body), name  # the same reading, or the figures mean nothing
        ours, reference = median_ms(lambda: fast(body), args.repeat), median_ms(lambda: decoded(body), args.repeat)  # noqa: B023 - called at once, in this iteration
        figures.add(f"{short} from the bytes", ours, "ms")
        figures.add(f"{short} JSON decoder", reference, "ms")
        figures.add(f"{short} ratio", ours / reference, "x")
        figures.add(f"{short} answer size", len(body) / 1e6, "MB", "")
        print(f"  {name:22s} {len(body) / 1e6:5.1f} MB: from the bytes {ours:6.1f} ms, "
              f"JSON decoder {reference:6.1f} ms (ratio {ours / reference:.2f}x)")

    figures.write(args.json)


if __name__ == "__main__":
    main()
