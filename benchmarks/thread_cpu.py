"""CPU time by kind of thread, from /proc/self/task: where a process's CPU goes, without a sampler's noise.

A thread's kind is its Python name without what names its instance ("fleet fleet-07" -> "fleet", "watch
/api/v1/nodes" -> "watch /api/v1/nodes"), so twenty clusters' pollers add up to one line. Threads that ended
inside the window (a query's short-lived pool) are counted together as "ended threads", from the process's
total."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import threading
import time
from collections import Counter

_TICK = os.sysconf("SC_CLK_TCK")


def _kind(name: str) -> str:
    if name.startswith("fleet "):
        return "fleet pollers"
    if name.startswith("watch "):  # one per kind watched, per cluster: "watch /apis/apps/v1/deployments"
        return "watch " + re.sub(r"/namespaces/[^/]+", "", name[6:])
    return re.sub(r"[-_ ]?\d+(_\d+)?$", "", name) or "?"


def _per_thread() -> dict[int, float]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while read
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


class ThreadCpu:
    """start() then stop(): CPU seconds per kind of thread over the window, largest first."""

    def start(self) -> ThreadCpu:
        self._cpu0, self._t0, self._before = time.process_time(), time.monotonic(), _per_thread()
        return self

    def stop(self) -> list[tuple[str, float]]:
        after, total = _per_thread(), time.process_time() - self._cpu0
        names = {t.native_id: t.name for t in threading.enumerate()}
        by_kind: Counter[str] = Counter()
        for tid, cpu in after.items():
            by_kind[_kind(names.get(tid, "?"))] += cpu - self._before.get(tid, 0.0)
        by_kind["ended threads"] += max(0.0, total - sum(by_kind.values()))
        return [(k, round(v, 2)) for k, v in by_kind.most_common() if v >= 0.005]


def shares(kinds: list[tuple[str, float]], wall_s: float) -> str:
    """One line: each kind's share of a core over the window."""
    return "; ".join(f"{k} {v / wall_s * 100:.1f}%" for k, v in kinds)


def py_spy(seconds: float, output: str) -> subprocess.Popen | None:
    """py-spy sampling this process for `seconds` into `output` (collapsed stacks, one line per stack, by thread),
    from its own process and without stopping this one (--nonblocking): what each thread ran, where the CPU by
    kind of thread says how much. None when no output is asked for. A benchmark's --profile; wait() on it."""
    if not output:
        return None
    return subprocess.Popen(["py-spy", "record", "--pid", str(os.getpid()), "--duration", str(max(1, round(seconds))),
                             "--rate", "50", "--format", "raw", "--threads", "--nonblocking", "--output", output],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def need_py_spy(parser: argparse.ArgumentParser, output: str) -> None:
    """--profile asked for without py-spy on PATH: one line, before anything is set up."""
    if output and shutil.which("py-spy") is None:
        parser.error("--profile needs py-spy on PATH (python3 -m pip install py-spy)")
