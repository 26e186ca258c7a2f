"""gputui's reading of a Karpenter budget's schedule window against the real thing: a small Go program built from
github.com/robfig/cron/v3@v3.0.1 (the version sigs.k8s.io/karpenter v1.13.0's go.mod requires) running Karpenter's
Budget.IsActive (pkg/apis/v1/nodepool.go: cron.ParseStandard("TZ=UTC " + schedule), Next(now - duration), not after
now) over random schedules, durations and times, seeded. Each answer (open, closed, or refused) must be the same.
Built into the module cache as scripts/build-argo-rollouts.sh builds its controller (GOPATH=${GPUTUI_CACHE}/gomod)."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from gputui.policy.karpenter_schedule import ScheduleError, window_open
from tests.support.procs import HarnessError

GO_MAIN = '''package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		parts := strings.Split(in.Text(), "\\t")
		now, _ := strconv.ParseInt(parts[2], 10, 64)
		d, err := time.ParseDuration(parts[1])
		if err != nil {
			fmt.Println("error")
			continue
		}
		s, err := cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", parts[0]))
		if err != nil {
			fmt.Println("error")
			continue
		}
		n := time.Unix(now, 0).UTC()
		fmt.Println(!s.Next(n.Add(-d)).After(n))
	}
}
'''


def _karpenter_is_active(tmp: Path) -> Path:
    cache = Path(os.environ.get("GPUTUI_CACHE", Path.home() / ".cache/gputui"))
    env = dict(os.environ, GOPATH=str(cache / "gomod"), GOFLAGS="-mod=mod", GO111MODULE="on")
    (tmp / "go.mod").write_text("module cronx\n\ngo 1.24\n\nrequire github.com/robfig/cron/v3 v3.0.1\n")
    (tmp / "main.go").write_text(GO_MAIN)
    for argv in (["go", "mod", "tidy"], ["go", "build", "-o", "is-active", "."]):
        done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise HarnessError(f"{' '.join(argv)} for robfig/cron v3.0.1 failed: {done.stderr[-2000:]}")
    subprocess.run(["chmod", "-R", "u+w", str(cache / "gomod" / "pkg")], check=False)
    return tmp / "is-active"


def _field(rng: random.Random, low: int, high: int, names: list[str]) -> str:
    r = rng.random()
    if r < 0.3:
        return "*"
    if r < 0.4:
        return f"*/{rng.randint(1, 5)}"
    if r < 0.6:
        return str(rng.randint(low, high))
    if r < 0.75:
        a = rng.randint(low, high)
        return f"{a}-{rng.randint(a, high)}"
    if r < 0.85:
        return f"{rng.randint(low, high)}/{rng.randint(1, 7)}"
    if r < 0.93:
        return ",".join(str(rng.randint(low, high)) for _ in range(rng.randint(2, 3)))
    return rng.choice(names) if names else "?"


def _cases(n: int) -> list[tuple[str, str, int]]:
    rng = random.Random(40)
    out = []
    for _ in range(n):
        if rng.random() < 0.08:
            spec = rng.choice(["@daily", "@hourly", "@weekly", "@monthly", "@yearly", "@midnight", "@annually",
                               "0 0 30 2 *", "0 0 31 4 *", "0 0 * * 7", "61 * * * *"])
        else:
            spec = " ".join([_field(rng, 0, 59, []), _field(rng, 0, 23, []), _field(rng, 1, 31, []),
                             _field(rng, 1, 12, ["jan", "Feb", "DEC"]), _field(rng, 0, 6, ["mon", "SUN", "sat"])])
        duration = rng.choice(["1m", "10m", "1h", "8h", "1h30m", "24h", "72h", "30m", "168h", "2h0m0s"])
        now = rng.randint(1_750_000_000, 1_900_000_000)
        if rng.random() < 0.3:
            now -= now % 60  # on the minute: a hit's own second
        out.append((spec, duration, now))
    return out


def test_every_window_is_open_or_closed_as_karpenter_and_robfig_cron_decide(tmp_path):
    binary = _karpenter_is_active(tmp_path)
    cases = _cases(3000)
    done = subprocess.run([str(binary)], input="".join(f"{s}\t{d}\t{n}\n" for s, d, n in cases), capture_output=True,
                          text=True, timeout=120, check=True)
    theirs = done.stdout.split()
    assert len(theirs) == len(cases)
    assert {"true", "false", "error"} <= set(theirs)  # each answer occurs: the sample is not one-sided
    ours = []
    for spec, duration, now in cases:
        try:
            ours.append(str(window_open(spec, duration, float(now))).lower())
        except ScheduleError:
            ours.append("error")
    differ = [(c, o, t) for c, o, t in zip(cases, ours, theirs, strict=True) if o != t]
    assert differ == [], differ[:10]
