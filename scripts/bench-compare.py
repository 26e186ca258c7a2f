#!/usr/bin/env python3
"""Two runs of one benchmark side by side: the change per figure, better or worse.

    python3 benchmarks/startup.py --runs 9 --json /tmp/old.json     # on the old commit
    python3 benchmarks/startup.py --runs 9 --json /tmp/new.json     # on the new one
    python3 scripts/bench-compare.py /tmp/old.json /tmp/new.json

A figure is "worse" when it moved the wrong way by more than --noise (default 5%): benchmarks on a shared
machine move by a few percent between runs (startup.py's own A/B, interleaved in one run, is the finer tool).
Exits 0, or 1 with --fail-on-worse when a figure got worse, or 2 on a file it cannot read (one line, no trace).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import FORMAT  # the checkout's own, whatever the working directory


class Unreadable(Exception):
    pass


def load(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Unreadable(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("figures"), dict):
        raise Unreadable(f"{path}: not a benchmark's figures (written by a benchmark's --json, format {FORMAT})")
    return data


def _number(figure: Any) -> float | None:
    value = figure.get("value") if isinstance(figure, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def verdict(old: float | None, new: float | None, better: str, noise: float) -> str:
    if old is None or new is None:
        return "not measured in " + ("both" if old is None and new is None else "old" if old is None else "new")
    if better not in ("lower", "higher") or old == new:
        return "same" if old == new else ""
    if old == 0:
        change = math.inf
    else:
        change = (new - old) / abs(old)
    if abs(change) <= noise:
        return "within noise"
    improved = change < 0 if better == "lower" else change > 0
    return "better" if improved else "WORSE"


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def compare(old: dict[str, Any], new: dict[str, Any], noise: float) -> tuple[list[str], int]:
    """The lines to print and how many figures got worse."""
    lines = []
    if old.get("benchmark") != new.get("benchmark"):
        lines.append(f"note: different benchmarks ({old.get('benchmark')!r} and {new.get('benchmark')!r})")
    changed = {k for k in set(old.get("settings") or {}) | set(new.get("settings") or {})
               if (old.get("settings") or {}).get(k) != (new.get("settings") or {}).get(k)}
    if changed:
        lines.append("note: run with different settings: " + ", ".join(
            f"{k} {(old.get('settings') or {}).get(k)!r} → {(new.get('settings') or {}).get(k)!r}" for k in sorted(changed)))
    lines.append(f"old: {old.get('commit') or '?'} at {old.get('when') or '?'}; new: {new.get('commit') or '?'} "
                 f"at {new.get('when') or '?'}")
    names = list(old["figures"]) + [k for k in new["figures"] if k not in old["figures"]]
    width = max([len(n) for n in names] + [6])
    lines.append(f"{'figure':{width}}  {'old':>12}  {'new':>12}  {'change':>8}  verdict")
    worse = 0
    for name in names:
        a, b = old["figures"].get(name), new["figures"].get(name)
        ref = b if isinstance(b, dict) else a if isinstance(a, dict) else {}
        unit, better = str(ref.get("unit", "")), str(ref.get("better", ""))
        va, vb = _number(a), _number(b)
        if a is None or b is None:
            lines.append(f"{name:{width}}  {_fmt(va, unit):>12}  {_fmt(vb, unit):>12}  {'':>8}  "
                         f"only in {'new' if a is None else 'old'}")
            continue
        change = "" if va is None or vb is None or va == 0 else f"{(vb - va) / abs(va) * 100:+.1f}%"
        word = verdict(va, vb, better, noise)
        worse += word == "WORSE"
        lines.append(f"{name:{width}}  {_fmt(va, unit):>12}  {_fmt(vb, unit):>12}  {change:>8}  {word}")
    return lines, worse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--noise", type=float, default=5.0, metavar="PERCENT",
                        help="a change this small is within noise (default 5)")
    parser.add_argument("--fail-on-worse", action="store_true", help="exit 1 when a figure got worse")
    args = parser.parse_args(argv)
    if not math.isfinite(args.noise) or args.noise < 0:
        print("bench-compare: --noise is a percentage, 0 or more", file=sys.stderr)
        return 2
    try:
        old, new = load(args.old), load(args.new)
    except Unreadable as exc:
        print(f"bench-compare: {exc}", file=sys.stderr)
        return 2
    lines, worse = compare(old, new, args.noise / 100)
    try:
        print("\n".join(lines))
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stderr.close()
        return 0
    return 1 if worse and args.fail_on_worse else 0


if __name__ == "__main__":
    sys.exit(main())
