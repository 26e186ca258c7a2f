"""A benchmark's figures, as printed and as JSON: `--json FILE` writes what the run measured so that
`scripts/bench-compare.py OLD NEW` prints the change per figure, and a change's cost is one command.

Each benchmark keeps printing its own lines (what a person reads); it also hands every figure it prints to a
`Figures`, with its unit and which way is better. The JSON holds the figures, the benchmark's settings (a
comparison of runs made with different settings says so) and where it ran (the commit, the machine's cores).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "gputui-benchmark/1"  # the JSON's "format": bench-compare refuses any other
BETTER = ("lower", "higher", "")  # "" = a count or setting worth seeing, neither way better


@dataclass(frozen=True, slots=True)
class Figure:
    value: float | None  # None: not measured in this run (a phase that failed, a figure with no sample)
    unit: str = ""
    better: str = "lower"


@dataclass
class Figures:
    benchmark: str
    settings: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)

    def add(self, name: str, value: float, unit: str = "", better: str = "lower") -> float:
        """Record one figure under a stable name (what the comparison matches on); returns the value so a print
        can use it in place. NaN or infinity is kept as not measured."""
        if better not in BETTER:
            raise ValueError(f"better is one of {BETTER}, not {better!r}")
        if name in self.figures:
            raise ValueError(f"figure {name!r} recorded twice")
        number = float(value) if math.isfinite(value) else None
        self.figures[name] = Figure(number, unit, better)
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "benchmark": self.benchmark, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "commit": _commit(), "cpus": os.cpu_count(), "python": platform.python_version(),
                "settings": self.settings, "figures": {k: asdict(f) for k, f in self.figures.items()}}

    def write(self, path: str | None) -> None:
        """Write the JSON when --json was given (atomically: a reader never sees half a file)."""
        if not path:
            return
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")
        tmp.replace(target)
        print(f"figures written to {target}")


def json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON (for scripts/bench-compare.py)")


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """A run's settings: its command-line arguments, less the output file."""
    return {k: v for k, v in sorted(vars(args).items()) if k != "json" and isinstance(v, (str, int, float, bool, type(None)))}


def _commit() -> str:
    """The checkout's commit, "+dirty" when it has uncommitted changes; "" outside git."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return sha + ("+dirty" if dirty else "")
