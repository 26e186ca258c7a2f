"""How soon gputui sees a change or says that something cannot answer: the figures the tests used to assert as
time limits (issue 34: a test asserts behaviour, a benchmark measures time).

  watch         on the test apiserver: another client adds a node, cordons one, removes the added one; seconds
                from each write's answer to the first snapshot that shows it (the reader's watches, polled every
                0.05 s), against the REFRESH of 2 s a user waits at most between two of the app's snapshots
                (test_kube_backend.test_changes_by_another_client_show_in_the_snapshots_that_follow)
  unreachable   `gputui nodes` against a kubeconfig whose server refuses connections, process start to its
                one-line error (exit 2), against the same interpreter starting `gputui --version`
                (test_cli_cluster_errors.test_unreachable_server_is_one_line_naming_the_refused_connection)
  silent-store  a metrics query to a server that accepts and never answers, with prometheus_timeout 1 s: seconds
                to the BackendError, against the timeout (one wait, no retry, would be about 1 s)
                (test_metrics_stores_real.test_a_store_down_or_silent_is_one_line_and_unknown)

    python benchmarks/reaction_times.py [--runs 5] [--only watch,unreachable,silent-store]

`watch` needs the control-plane binaries (scripts/build-control-plane.sh); the others need no server.
Prints the median and the worst of each figure.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from tests.support.gputui_cli import closed_port, environment, kubeconfig

KINDS = ("watch", "unreachable", "silent-store")
REFRESH_S = 2.0  # the app's default refresh: what a change waits at most for the next snapshot


def report(figures: Figures, key: str, name: str, samples: list[float], against: str = "") -> None:
    figures.add(f"{key} median", statistics.median(samples), "s")
    figures.add(f"{key} worst", max(samples), "s")
    print(f"{name:44} median {statistics.median(samples):6.3f} s   worst {max(samples):6.3f} s   "
          f"({len(samples)} runs){'   ' + against if against else ''}", flush=True)


def seconds_until(check: Callable[[], bool], limit: float = 60.0, poll: float = 0.05) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > limit:
            raise SystemExit(f"nothing seen within {limit:.0f} s")
        time.sleep(poll)
    return time.monotonic() - started


def watch(runs: int, figures: Figures) -> None:
    from kubernetes import client

    from gputui.backends.kube_backend import live_backend
    from gputui.settings import Settings
    from tests.support.control_plane import ControlPlane
    from tests.support.fake_kubelet import FakeKubelet

    added, cordoned, removed = [], [], []
    with ExitStack() as stack:
        cp = stack.enter_context(ControlPlane())
        kubelet = FakeKubelet(cp.kubeconfigs["kubelet"], heartbeat_interval=10).start()
        stack.callback(kubelet.stop)
        kubelet.add_node("bench-gpu-1", gpus=8)
        backend = live_backend(Settings(kubeconfig=str(cp.admin_kubeconfig), refresh=REFRESH_S))
        stack.callback(backend.close)
        core = client.CoreV1Api(cp.admin_client())
        backend.reader.snapshot()  # the first list: not what is measured
        for i in range(runs):
            name = f"bench-late-{i}"
            kubelet.add_node(name, gpus=4)
            added.append(seconds_until(lambda: backend.reader.snapshot().node(name) is not None))  # noqa: B023 - called at once, in this iteration
            core.patch_node("bench-gpu-1", {"spec": {"unschedulable": True}})
            cordoned.append(seconds_until(lambda: backend.reader.snapshot().node("bench-gpu-1").unschedulable))
            core.patch_node("bench-gpu-1", {"spec": {"unschedulable": None}})
            seconds_until(lambda: not backend.reader.snapshot().node("bench-gpu-1").unschedulable)
            kubelet.remove_node(name)
            removed.append(seconds_until(lambda: backend.reader.snapshot().node(name) is None))  # noqa: B023 - called at once, in this iteration
    against = f"against a {REFRESH_S:.0f} s refresh"
    report(figures, "watch added", "watch: a node added, to a snapshot", added, against)
    report(figures, "watch cordoned", "watch: a node cordoned, to a snapshot", cordoned, against)
    report(figures, "watch removed", "watch: a node removed, to a snapshot", removed, against)


def process_seconds(*args: str, home: Path) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gputui", *args], capture_output=True, text=True,
                          env=environment(home, None), timeout=120)
    return time.monotonic() - started, done


def unreachable(runs: int, figures: Figures) -> None:
    errors, floor = [], []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for _ in range(runs):
            kc = kubeconfig(home / "kc", f"https://127.0.0.1:{closed_port()}")
            took, done = process_seconds("nodes", "--kubeconfig", kc, home=home)
            if done.returncode != 2 or "connection refused" not in done.stderr:
                raise SystemExit(f"expected exit 2 naming the refused connection, got {done.returncode}: {done.stderr}")
            errors.append(took)
            floor.append(process_seconds("--version", home=home)[0])
    figures.add("unreachable reference (gputui --version) median", statistics.median(floor), "s")
    report(figures, "unreachable", "unreachable: gputui nodes to its one-line error", errors,
           f"against `gputui --version`: median {statistics.median(floor):.3f} s")


def silent_store(runs: int, figures: Figures) -> None:
    from gputui.backends.base import BackendError
    from gputui.backends.prom import PromConfig, PromSource

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    waited = []
    try:
        for _ in range(runs):
            source = PromSource(PromConfig(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=1.0))
            started = time.monotonic()
            try:
                source.fetch({"x"}, per_gpu=False)
                raise SystemExit("a silent store answered")
            except BackendError:
                waited.append(time.monotonic() - started)
            finally:
                source.close()
    finally:
        stop.set()
        acceptor.join()
        for s in held:
            s.close()
        silent.close()
    report(figures, "silent-store", "silent-store: a fleet query to its BackendError", waited, "against prometheus_timeout 1 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default=",".join(KINDS), help=f"some of {','.join(KINDS)}")
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("reaction_times", settings_of(args))
    kinds = [k for k in args.only.split(",") if k]
    if not kinds or set(kinds) - set(KINDS):
        parser.error(f"--only: some of {','.join(KINDS)}")
    if args.runs < 1:
        parser.error("--runs: at least 1")
    for kind in KINDS:
        if kind in kinds:
            {"watch": watch, "unreachable": unreachable, "silent-store": silent_store}[kind](args.runs, figures)
    figures.write(args.json)


if __name__ == "__main__":
    main()
