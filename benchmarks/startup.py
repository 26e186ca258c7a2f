"""Process start to first full frame: `gputui --demo` against a bare Textual app.

Each run starts a fresh Python process on a pseudo-terminal (so Textual really
draws), and the child notes CLOCK_MONOTONIC when the first frame holding data
has been written: for gputui, a frame with the node table filled from the
first snapshot; for the bare app, its first frame. Prints medians and the ratio.

    python benchmarks/startup.py [--runs 7] [--size 200x50]
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

CHILD = r'''
import os, sys, time
from textual.app import App

out = sys.argv[2]
original = App._display

def done(app):
    with open(out, "w") as f:
        f.write(repr(time.monotonic()))
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
    from gputui.cli import main
    sys.exit(main(["--demo"]))
'''


def one_run(kind: str, cols: int, rows: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t")
        env = dict(os.environ, COLUMNS=str(cols), LINES=str(rows), TERM="xterm-256color",
                   XDG_STATE_HOME=tmp, XDG_CONFIG_HOME=tmp)
        # An installed gputui starts from compiled bytecode; with this set (as on some CI machines) every
        # changed module would be compiled again on every run, and the warm-up run could not help.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        master, slave = pty.openpty()
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, out], stdin=slave, stdout=slave,
                                stderr=slave, env=env, close_fds=True)
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
            return float(f.read()) - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", default="200x50")
    args = parser.parse_args()
    cols, rows = map(int, args.size.split("x"))
    kinds = ("bare", "gputui")
    for kind in kinds:
        one_run(kind, cols, rows)  # warm the page cache and .pyc files
    # Interleaved, so a machine that slows down or speeds up meanwhile weighs on both alike.
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind in kinds:
            samples[kind].append(one_run(kind, cols, rows))
    results = {}
    for kind, times in samples.items():
        results[kind] = statistics.median(times)
        print(f"{kind:7s} first full frame: median {results[kind] * 1000:6.0f} ms "
              f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, {args.runs} runs, {args.size})")
    pairs = sorted(g / b for g, b in zip(samples["gputui"], samples["bare"], strict=True))
    print(f"ratio of each interleaved pair: median {statistics.median(pairs):.2f}x "
          f"(from {pairs[0]:.2f}x to {pairs[-1]:.2f}x)")
    print(f"ratio gputui/bare: {results['gputui'] / results['bare']:.2f}x (goal <= 2x)")


if __name__ == "__main__":
    main()
