"""Process and port helpers shared by the integration-test harness.

Every server the harness starts goes through :class:`ManagedProcess`: its
output goes to a log file, it is stopped by PID (terminate, wait, kill) and a
failure to start raises :class:`HarnessError` with the tail of that log, so a
broken environment fails the tests loudly instead of skipping them.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

LOOPBACK = "127.0.0.1"


class HarnessError(RuntimeError):
    """A test server failed to start or misbehaved (message has the log tail)."""


def http() -> requests.Session:  # noqa: F821 - imported inside: the harness need not load requests
    """A requests session for loopback servers that ignores the environment
    (REQUESTS_CA_BUNDLE would override ``verify``; proxies have no business here)."""
    import requests

    s = requests.Session()
    s.trust_env = False
    return s


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def log_tail(path: Path | str, lines: int = 40) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return f"(no log: {exc})"
    text = data[-64_000:].decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


def wait_for(
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.2,
    what: str = "condition",
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Call ``check`` until it returns a truthy value (which is returned).

    Exceptions raised by ``check`` count as "not yet"; the last one is shown
    when the deadline passes. ``on_timeout`` can add context (a log tail).
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    last_val: object = None
    while True:
        try:
            last_val = check()
            if last_val:
                return last_val  # type: ignore[return-value]
        except Exception as exc:  # noqa: BLE001 - anything means "not ready yet"
            last_exc = exc
        if time.monotonic() >= deadline:
            msg = f"timed out after {timeout:.0f}s waiting for {what}"
            if last_exc is not None:
                msg += f"; last error: {last_exc!r}"
            elif last_val is not None:
                msg += f"; last value: {last_val!r}"
            if on_timeout is not None:
                msg += "\n" + on_timeout()
            raise HarnessError(msg)
        time.sleep(interval)


def wait_until(check: Callable[[], T], timeout: float = 20.0, interval: float = 0.2, what: str = "condition") -> T:
    """wait_for as the tests write it: `wait_until(lambda: …, 15, what="…")`."""
    return wait_for(check, timeout=timeout, interval=interval, what=what)


# --- child processes ------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort
        pass


class ManagedProcess:
    """A server process with a log file, stopped by its PID."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> ManagedProcess:
        if self.running():
            raise HarnessError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        log.write(f"\n=== starting {self.name}: {' '.join(self.argv)}\n".encode())
        log.flush()
        # A child that outlives pytest (killed with SIGKILL) would hold ports
        # and burn CPU: ask the kernel to SIGTERM it when we die. PDEATHSIG
        # fires when the *thread* that forked exits, so only use it from the
        # main thread.
        preexec = _die_with_parent if threading.current_thread() is threading.main_thread() else None
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                preexec_fn=preexec,
            )
        except OSError as exc:
            raise HarnessError(f"cannot start {self.name} ({self.argv[0]}): {exc}") from exc
        finally:
            log.close()
        with _live_lock:
            _live.add(self)
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """Terminate, wait up to ``timeout``, then kill. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.terminate()
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        with _live_lock:
            _live.discard(self)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL (a crash, not a clean shutdown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        with _live_lock:
            _live.discard(self)

    def tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def describe_failure(self, lines: int = 40) -> str:
        state = "running" if self.running() else f"exited with {self.proc.returncode if self.proc else None}"
        return f"--- {self.name} ({state}); last lines of {self.log_path}:\n{self.tail(lines)}"

    def check_alive(self) -> None:
        if not self.running():
            raise HarnessError(f"{self.name} exited unexpectedly\n{self.describe_failure()}")

    def wait_ready(self, check: Callable[[], object], *, timeout: float, what: str) -> None:
        """Wait for ``check`` to be truthy; fail at once if the process dies."""

        def probe() -> object:
            self.check_alive()
            return check()

        try:
            wait_for(probe, timeout=timeout, what=f"{self.name}: {what}", on_timeout=self.describe_failure)
        except HarnessError as exc:
            if not self.running():
                raise HarnessError(f"{self.name} exited during startup\n{self.describe_failure()}") from exc
            raise


def stop_all() -> None:
    """Stop every process still registered (used at interpreter exit)."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        with suppress(Exception):
            p.stop(timeout=5)


atexit.register(stop_all)


def run(argv: Sequence[str], *, timeout: float = 60, check: bool = True, env: dict[str, str] | None = None,
        input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run a short command; on failure raise with its output."""
    try:
        res = subprocess.run([str(a) for a in argv], capture_output=True, timeout=timeout, env=env, input=input)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"{argv[0]} timed out after {timeout}s") from exc
    if check and res.returncode != 0:
        raise HarnessError(
            f"{' '.join(map(str, argv))} exited {res.returncode}\n"
            f"stdout:\n{res.stdout.decode(errors='replace')[-4000:]}\n"
            f"stderr:\n{res.stderr.decode(errors='replace')[-4000:]}"
        )
    return res


def dead(pid: int) -> bool:
    """The process is gone, or a zombie (dead; reaped by init in a moment)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return True  # gone between the two looks
    return state == "Z"


def queued(sock: socket.socket) -> int:
    """How many connections the kernel completed on a listening socket nobody accepted from (each one stays
    queued, closed by its client or not, until accepted)."""
    sock.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1
