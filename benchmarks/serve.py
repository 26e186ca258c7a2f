"""`gputui serve --wallboard` in Debian's chromium: how soon the board is in the page, and what serving costs.

Measures, on the demo cluster at a 2 s refresh:
  - the page's first contentful paint (the HTML shell, as the browser reports it) and the time from
    the login (the token submitted) to the board's words reaching the page (its first frame): median of
    --runs page loads
  - CPU share of one core and RSS of the served processes (the web server and the page's gputui) over
    --steady seconds with the page open
  - the reference, in the same run: the same wallboard in a terminal (tmux, 200x50), no web layer

    python benchmarks/serve.py [--runs 5] [--steady 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.figures import Figures, json_option, settings_of
from tests.support.browser import Browser
from tests.support.procs import free_port, port_is_free, wait_until

TICKS = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """The process and its descendants (the page's gputui is the server's child, through a shell)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo += [int(c) for c in children]
    return out


def cpu_s(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def rss_mb(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def steady(pid: int, seconds: float) -> tuple[float, float]:
    pids = tree(pid)
    before, start = cpu_s(pids), time.monotonic()
    time.sleep(seconds)
    pids = tree(pid)
    return 100 * (cpu_s(pids) - before) / (time.monotonic() - start), rss_mb(pids)


def token_of(out: Path) -> str:
    """The token gputui serve prints once as it starts, on its second line (tests/e2e/test_serve_browser.py)."""
    lines = wait_until(lambda: out.read_text().splitlines()[1:2], 10, what="gputui serve's token line")
    if not lines[0].startswith("token"):
        raise SystemExit(f"serve.py: no token line from gputui serve: {lines[0]!r}")
    return lines[0].rsplit(": ", 1)[1].strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steady", type=float, default=30.0)
    json_option(ap)
    args = ap.parse_args()
    figures = Figures("serve", settings_of(args))
    home = Path(tempfile.mkdtemp(prefix="gputui-serve-bench-"))
    env = dict(os.environ, HOME=str(home), XDG_STATE_HOME=str(home / "state"), XDG_CONFIG_HOME=str(home / "config"))
    port = free_port()
    # Files, not pipes: each page's gputui writes its stderr to serve's stdout, and a full pipe would stall it.
    out = home / "serve.out"
    with out.open("w") as stdout, (home / "serve.err").open("w") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "gputui", "--demo", "serve", "--wallboard", "--refresh",
                                   "2", "--port", str(port)], stdout=stdout, stderr=stderr, env=env)
    browser = None
    try:
        wait_until(lambda: not port_is_free(port), 30, what="gputui serve listening")
        token = token_of(out)
        paints, boards = [], []
        for i in range(args.runs):
            if browser is not None:
                browser.close()
            browser = Browser(home / f"chromium-{i}")
            # The page asks for the token first (gputui serve asks for it on loopback too): the board's time
            # is counted from the login form's submit, as a person waits for it once the token is typed.
            browser.log_in(f"http://127.0.0.1:{port}/", token)
            boards.append(browser.wait_for_text("GPUs in use", "Fleet heat map"))
            fcp = browser.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
            paints.append((fcp or 0) / 1000)
        cpu, rss = steady(server.pid, args.steady)
    finally:
        if browser is not None:
            browser.close()
        server.terminate()
        server.wait(timeout=15)

    # The reference: the same wallboard, same refresh, in a terminal.
    sock = f"bench-{os.getpid()}"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "200", "-y", "50", "-s", "w",
                    f"{shutil.which('env')} HOME={home} {sys.executable} -m gputui --demo --wallboard --refresh 2"],
                   check=True)
    try:
        time.sleep(5)
        pane = int(subprocess.run(["tmux", "-L", sock, "display", "-p", "-t", "w", "#{pane_pid}"],
                                  capture_output=True, text=True, check=True).stdout)
        ref_cpu, ref_rss = steady(pane, args.steady)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], check=False)

    figures.add("first contentful paint", statistics.median(paints), "s")
    figures.add("board in the page", statistics.median(boards), "s")
    figures.add("board in the page max", max(boards), "s")
    figures.add("served CPU", cpu, "% core")
    figures.add("served RSS", rss, "MB")
    figures.add("terminal CPU", ref_cpu, "% core")
    figures.add("terminal RSS", ref_rss, "MB")
    figures.add("served/terminal CPU", cpu / ref_cpu if ref_cpu else float("nan"), "x")
    figures.add("served/terminal RSS", rss / ref_rss if ref_rss else float("nan"), "x")
    print(f"first contentful paint (page shell): median {statistics.median(paints):.2f}s over {args.runs} loads")
    print(f"board in the page (navigate -> first frame's words): median {statistics.median(boards):.2f}s, "
          f"max {max(boards):.2f}s")
    print(f"served (web server + page's gputui), 2 s refresh, page open: {cpu:.1f}% of a core, {rss:.0f} MB RSS")
    print(f"reference (the same wallboard in tmux 200x50): {ref_cpu:.1f}% of a core, {ref_rss:.0f} MB RSS")
    print(f"ratio served/terminal: CPU {cpu / ref_cpu if ref_cpu else float('nan'):.2f}x, "
          f"RSS {rss / ref_rss if ref_rss else float('nan'):.2f}x")

    figures.write(args.json)


if __name__ == "__main__":
    main()
