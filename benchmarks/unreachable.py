"""How long a write command takes to say that the apiserver never answers, against one that refuses at once.

tests/unit/test_unreachable_apiserver.py checks what is said (timed out, exit 2, no permission wording); the
time it takes is this figure. Each run is `gputui shift` as a user types it, in a fresh process, against a
port the kernel accepts on and nobody answers (silent) or a closed port (refused: start-up and one failed
connect, the reference). Printed: the medians, the silent run's wait beyond the reference and the ratio, and
how many connections the silent runs made (each an attempt that waited; a retry would add one).

    python benchmarks/unreachable.py [--runs 3]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import Figures, json_option, settings_of
from tests.support.gputui_cli import closed_port, kubeconfig, run
from tests.support.procs import queued

SHIFT = ("shift", "llm/mistral-7b", "--to", "v2=10")


def one(silent: bool) -> tuple[float, int]:
    """Seconds to the one-line answer, and the connections made (silent only)."""
    with tempfile.TemporaryDirectory() as home:
        sock = socket.socket()
        try:
            if silent:
                sock.bind(("127.0.0.1", 0))
                sock.listen(64)
                port = sock.getsockname()[1]
            else:
                port = closed_port()
            kc = kubeconfig(Path(home) / "kc", f"https://127.0.0.1:{port}")
            start = time.monotonic()
            out = run(*SHIFT, "--kubeconfig", kc, home=Path(home))
            took = time.monotonic() - start
            if out.returncode != 2 or "could not be reached" not in out.stderr:
                raise SystemExit(f"unexpected answer (exit {out.returncode}): {out.stderr.strip()}")
            return took, queued(sock) if silent else 0
        finally:
            sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    json_option(parser)
    args = parser.parse_args()
    figures = Figures("unreachable", settings_of(args))
    refused = [one(silent=False)[0] for _ in range(args.runs)]
    silent_runs = [one(silent=True) for _ in range(args.runs)]
    silent = [t for t, _ in silent_runs]
    ref, wait = statistics.median(refused), statistics.median(silent)
    figures.add("refused (reference)", ref, "s")
    figures.add("never answers", wait, "s")
    figures.add("connections per silent run", max(n for _, n in silent_runs), "", "lower")
    figures.add("wait beyond the reference", wait - ref, "s")
    figures.add("silent/refused", wait / ref, "x")
    print(f"refused (reference): median {ref:.2f}s of {args.runs} runs ({', '.join(f'{t:.2f}' for t in refused)})")
    print(f"never answers:       median {wait:.2f}s ({', '.join(f'{t:.2f}' for t in silent)}); "
          f"connections made per run: {sorted({n for _, n in silent_runs})}")
    print(f"waiting on the silent apiserver: {wait - ref:.2f}s beyond the reference; ratio {wait / ref:.1f}x")

    figures.write(args.json)


if __name__ == "__main__":
    main()
