"""A node's fault counts against its pool (gputui.policy.fault_peers.compare), by pool size: every node's (what
`gputui nodes -o json` lists) and one node's (what node detail and the evidence bundle ask), against the plain
reading of the others (a walk over the pool for each node) in the same run, at the sizes where that finishes.

One pool (the worst case: a fleet without pool labels), 2% of the nodes with XIDs.

    python benchmarks/fault_peers.py [--nodes 3000 100000] [--json FILE]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from gputui.policy.fault_peers import FAMILIES, XID_ANY, FaultWindow, compare, median, node_count

PLAIN_UP_TO = 5000  # the plain reading is quadratic: 3,000 nodes take seconds, 100,000 an hour


def fleet(n: int) -> tuple[FaultWindow, dict[str, str]]:
    rnd = random.Random(7)
    counts = {f"n{i:06d}": ({"XID 79": rnd.randint(1, 3)} if rnd.random() < 0.02 else {}) for i in range(n)}
    return FaultWindow(86400.0, counts, {node: frozenset(FAMILIES) for node in counts}), dict.fromkeys(counts, "p")


def plain(window: FaultWindow, pools: dict[str, str]) -> dict[str, tuple[float | None, int | None]]:
    """The XID total's median and next worst of each node's others, by a walk over the others."""
    read = {n: node_count(window, n, XID_ANY)[0] for n in pools}
    out = {}
    for n in pools:
        others = [c for m, c in read.items() if m != n and c is not None and pools[m] == pools[n]]
        out[n] = (median(others), max(others, default=None))
    return out


def cpu(fn, *args, **kw) -> tuple[float, object]:
    started = time.process_time()
    got = fn(*args, **kw)
    return time.process_time() - started, got


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[3000, 100000])
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("fault_peers", settings_of(args))
    for n in args.nodes:
        window, pools = fleet(n)
        every, peers = cpu(compare, window, "", pools)
        one, _ = cpu(compare, window, "", pools, only=next(iter(pools)))
        line = f"{n:>7} nodes in one pool: every node {every:.2f} s, one node {one:.2f} s"
        figures.add(f"every node of {n}", every, "s")
        figures.add(f"one node of {n}", one, "s")
        if n <= PLAIN_UP_TO:
            walked, want = cpu(plain, window, pools)
            got = {m: next((p.pool_median, p.pool_next_worst) for p in ps if p.kind == XID_ANY)
                   for m, ps in peers.items()}
            assert got == want, "compare() and the plain reading disagree"
            line += f"; the plain reading of every node {walked:.2f} s ({every / walked:.3f}x)"
            figures.add(f"plain reading of {n}", walked, "s")
        print(line, flush=True)
    figures.write(args.json)


if __name__ == "__main__":
    main()
