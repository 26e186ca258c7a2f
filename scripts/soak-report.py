#!/usr/bin/env python3
"""The report of scripts/soak.sh: read run-1.xml .. run-N.xml (pytest's JUnit XML) in a directory and print
each test that failed at least once (a failure or an error, in its call or its set-up or tear-down), with
its runs, its failures and the first line of each different failure, then every run's totals. A run that
left no readable XML (pytest killed, a crash) is reported as such and counts as failed.

    python3 scripts/soak-report.py --runs N DIR        exit 0: no failure in any run; 1: some; 2: bad use
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TestRecord:
    runs: int = 0
    failures: int = 0
    first_lines: dict[str, list[int]] = field(default_factory=dict)  # a failure's first line -> the runs it came in


def first_line(element: ET.Element) -> str:
    """The failure's first line: its message, else its text (pytest puts the assertion there)."""
    for text in (element.get("message") or "", element.text or ""):
        for line in text.splitlines():
            if line.strip():
                return line.strip()[:200]
    return f"({element.tag} without a message)"


def read_run(path: Path) -> dict[str, list[str]] | None:
    """Per test of the run (classname::name), the first lines of its failures and errors (none: it passed or
    was skipped). A test's set-up and tear-down errors are cases of the same name: one test, one run."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    run: dict[str, list[str]] = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = [first_line(child) for child in case if child.tag in ("failure", "error")]
        run.setdefault(name, []).extend(bad)
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, required=True, help="how many runs soak.sh made")
    parser.add_argument("dir", type=Path, help="the directory holding run-1.xml .. run-N.xml")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: at least 1")
    tests: dict[str, TestRecord] = {}
    totals: list[str] = []
    broken_runs = 0
    for i in range(1, args.runs + 1):
        run = read_run(args.dir / f"run-{i}.xml")
        if run is None:
            broken_runs += 1
            totals.append(f"run {i}: no readable JUnit XML (see run-{i}.log): the run failed as a whole")
            continue
        for name, bad in run.items():
            record = tests.setdefault(name, TestRecord())
            record.runs += 1
            record.failures += bool(bad)
            for line in dict.fromkeys(bad):
                record.first_lines.setdefault(line, []).append(i)
        totals.append(f"run {i}: {len(run)} tests, {sum(bool(bad) for bad in run.values())} failed")
    flaky = {name: r for name, r in tests.items() if r.failures}
    print(f"== soak report: {args.runs} runs, {len(tests)} tests, {len(flaky)} failed at least once"
          f"{f', {broken_runs} runs without a report' if broken_runs else ''}")
    for name in sorted(flaky, key=lambda n: (-flaky[n].failures, n)):
        r = flaky[name]
        print(f"{name}\n    failed in {r.failures} of {r.runs} runs")
        for line, in_runs in r.first_lines.items():
            print(f"    run {','.join(map(str, in_runs))}: {line}")
    readable = args.runs - broken_runs
    partial = sorted(name for name, r in tests.items() if r.runs < readable)
    print(f"the other {len(tests) - len(flaky)} tests passed (or were skipped) in every run they were in")
    for name in partial:  # deselected or not collected in some runs: their figures cover fewer runs
        print(f"{name}: in {tests[name].runs} of {readable} runs")
    for line in totals:
        print(line)
    return 1 if flaky or broken_runs else 0


if __name__ == "__main__":
    sys.exit(main())
