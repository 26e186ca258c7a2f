"""Process start to first full frame: `gputui --demo` against a bare Textual app.

Each run starts a fresh Python process on a pseudo-terminal (so Textual really
draws), and the child notes CLOCK_MONOTONIC when the first frame holding data
has been written: for gputui, a frame with the node table filled from the
first snapshot; for the bare app, its first frame. Prints medians and the ratio.

    python benchmarks/startup.py [--runs 7] [--size 200x50] [--against TREE]

`--against TREE` also starts the gputui of another checkout (e.g. `git worktree add /tmp/before <commit>`),
interleaved with the others, and prints this tree's ratio to it: an A/B of a change in one run.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.figures import Figures, json_option, settings_of

CHILD = r'''
import os, sys, time
from textual.app import App

out = sys.argv[2]
original = App._display

def done(app):
    with open(out, "w") as f:
        f.write(f"{time.monotonic()!r} {sum(os.times()[:2])!r}")  # wall clock, then CPU of this process
    app.exit()

if sys.argv[1] == "bare":
    from textual.widgets import Static

    class Bare(App):
        def compose(self):
            yield Static("hello")

    def probe(self, screen, renderable):
        original(self, screen, renderable)
        if renderable is not None and not getattr(self, "_probed", False):
            self._probed = True
            done(self)

    App._display = probe
    Bare().run()
else:
    def probe(self, screen, renderable):
        original(self, screen, renderable)
        if renderable is None or getattr(self, "_probed", False) or getattr(self, "snapshot", None) is None:
            return
        try:
            rows = self.screen.query_one("#nodes").row_count
        except Exception:
            return
        if rows:
            self._probed = True
            done(self)

    App._display = probe
    # A checkout run from its tree (not installed) lacks the wheel's gputui.themes and gputui.keymaps,
    # which setuptools maps from the repo's top: lend them, the same way for every tree measured.
    import gputui
    gputui.__path__.append(sys.argv[3])
    from gputui.cli import main
    sys.exit(main(["--demo"]))
'''


HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(kind: str, cols: int, rows: int, tree: str = HERE) -> tuple[float, float]:
    """One start of `kind` ("bare" or "gputui"), importing gputui from `tree` (this checkout by default):
    seconds to the first full frame, and the CPU seconds the process spent until then (which a busy
    machine disturbs far less than the wall clock)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t")
        env = dict(os.environ, COLUMNS=str(cols), LINES=str(rows), TERM="xterm-256color",
                   XDG_STATE_HOME=tmp, XDG_CONFIG_HOME=tmp, PYTHONPATH=tree)
        # An installed gputui starts from compiled bytecode; with this set (as on some CI machines) every
        # changed module would be compiled again on every run, and the warm-up run could not help.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        master, slave = pty.openpty()
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        start = time.monotonic()
        shim = os.path.join(tmp, "shim")
        os.mkdir(shim)
        for data in ("themes", "keymaps"):
            os.symlink(os.path.join(tree, data), os.path.join(shim, data))
        proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, out, shim], stdin=slave, stdout=slave,
                                stderr=slave, env=env, close_fds=True, cwd=tree)
        os.close(slave)
        deadline = start + 30
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    os.read(master, 65536)  # drain, or the child blocks writing
                except OSError:
                    break
        proc.wait(timeout=10)
        os.close(master)
        with open(out) as f:
            wall, cpu = map(float, f.read().split())
            return wall - start, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", default="200x50")
    parser.add_argument("--against", metavar="TREE", help="another checkout's gputui, started interleaved")
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("startup", settings_of(args))
    cols, rows = map(int, args.size.split("x"))
    starts = {"bare": ("bare", HERE), "gputui": ("gputui", HERE)}
    if args.against:
        starts["against"] = ("gputui", os.path.abspath(args.against))
    kinds = tuple(starts)
    for kind in kinds:
        one_run(*starts[kind][:1], cols, rows, starts[kind][1])  # warm the page cache and .pyc files
    # Interleaved, so a machine that slows down or speeds up meanwhile weighs on all alike.
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind in kinds:
            wall, used = one_run(starts[kind][0], cols, rows, starts[kind][1])
            samples[kind].append(wall)
            cpu[kind].append(used)
    results = {}
    for kind, times in samples.items():
        results[kind] = statistics.median(times)
        figures.add(f"{kind} first frame", results[kind] * 1000, "ms")
        figures.add(f"{kind} CPU to first frame", statistics.median(cpu[kind]) * 1000, "ms")
        print(f"{kind:8s} first full frame: median {results[kind] * 1000:6.0f} ms "
              f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, {args.runs} runs, {args.size}); "
              f"CPU median {statistics.median(cpu[kind]) * 1000:.0f} ms")
    pairs = sorted(g / b for g, b in zip(samples["gputui"], samples["bare"], strict=True))
    print(f"ratio of each interleaved pair: median {statistics.median(pairs):.2f}x "
          f"(from {pairs[0]:.2f}x to {pairs[-1]:.2f}x)")
    print(f"ratio gputui/bare: {figures.add('gputui/bare', results['gputui'] / results['bare'], 'x'):.2f}x "
          f"(goal <= 1.5x); CPU {figures.add('gputui/bare CPU', statistics.median(cpu['gputui']) / statistics.median(cpu['bare']), 'x'):.2f}x")
    if args.against:
        ab = sorted(g / a for g, a in zip(samples["gputui"], samples["against"], strict=True))
        print(f"this tree / {args.against}: {results['gputui'] / results['against']:.2f}x "
              f"(interleaved pairs from {ab[0]:.2f}x to {ab[-1]:.2f}x); CPU "
              f"{statistics.median(cpu['gputui']) / statistics.median(cpu['against']):.2f}x")
    figures.write(args.json)


if __name__ == "__main__":
    main()
