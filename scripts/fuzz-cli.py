#!/usr/bin/env python3
"""Fuzz gputui's command line: many generated argvs per command, each run in-process through gputui's main.

Every subcommand of gputui's parser (read from the parser itself, so a new one is fuzzed too) and the bare TUI's
flags get --budget inputs each (default 10,000): argvs built from the command's own flags, with good values,
hostile ones (NaN, infinities, zero, negatives, huge numbers, '../..', 'http://[::1', ',', control characters,
empty strings) and mutations (a token dropped, repeated, swapped, or a stray one added), sometimes with a
generated config file. Each runs on the demo cluster (--demo) or against a kubeconfig whose apiserver refuses
every connection, under a throwaway HOME; nothing real is reached:

- the TUI's app and serve's web server are stubs that record the settings they were given (the TUI's own
  checks, theme and keymap loading, and serve's flag checks still run);
- DNS answers only for literal addresses and localhost;
- time is virtual on the main thread: a sleep a command asks for (a drain waiting on sessions, a canary holding
  a step) passes at once and moves time.time/monotonic on, so waits cost nothing; a command that has waited more
  than 2 virtual hours is stopped and counted as "waited" (it does what it was asked, slowly);
- a per-input limit of real time (--time-limit) catches hangs: a loop that never sleeps, a call that blocks. An
  input at the limit that slept at least 10 virtual seconds per real second was polling as asked: "waited".

It reports any traceback (an exception out of main, a crash file, "Traceback" in the output), any hang, any exit
code outside {0, 1, 2}, and a worker process that died; then the counts per command and exit code, and the rate.
Exit status: 0 when nothing was found, 1 otherwise.

    python scripts/fuzz-cli.py                    # 10,000 inputs per command, every CPU
    python scripts/fuzz-cli.py --budget 500 --commands drain,shift --seed 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# ----- virtual time: installed before gputui is imported, so defaults bound at import (sleep=time.sleep) are it ---

_real_sleep, _real_time, _real_monotonic = time.sleep, time.time, time.monotonic
MAX_VIRTUAL_S = 2 * 3600.0
WAITING_RATE = 10.0  # virtual seconds slept per real second above which a command at the limit was waiting, not hung


class Waited(BaseException):
    """A command slept more virtual time than MAX_VIRTUAL_S (BaseException: no `except Exception` swallows it)."""


class Hang(BaseException):
    """The per-input limit of real time passed."""


class _Clock:
    offset = 0.0
    slept = 0.0
    active = False


CLOCK = _Clock()


def _sleep(seconds: float) -> None:
    if CLOCK.active and threading.current_thread() is threading.main_thread():
        if seconds is None or seconds < 0:
            _real_sleep(seconds)  # raises as the real one does
        CLOCK.offset += seconds
        CLOCK.slept += seconds
        if CLOCK.slept > MAX_VIRTUAL_S:
            raise Waited()
        _real_sleep(0)  # let other threads run
    else:
        _real_sleep(seconds)


time.sleep = _sleep
time.time = lambda: _real_time() + CLOCK.offset
time.monotonic = lambda: _real_monotonic() + CLOCK.offset

_real_getaddrinfo = socket.getaddrinfo


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    """Offline: literal addresses and localhost resolve, any other name fails at once."""
    name = host.decode() if isinstance(host, bytes) else host
    if name in (None, "localhost") or _is_address(name):
        return _real_getaddrinfo(host, *args, **kwargs)
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known (fuzz-cli: offline)")


def _is_address(name: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(name.strip("[]").split("%")[0])
        return True
    except ValueError:
        return False


socket.getaddrinfo = _getaddrinfo  # type: ignore[assignment]

# ----- the commands and their flags, read from gputui's parser --------------------------------------------------


def command_specs() -> dict[str, list[dict[str, Any]]]:
    """{command: [action, ...]}: "" is the bare TUI. Each action: flags (or none: a positional), dest, nargs,
    choices, the name of its type."""
    from gputui.cli.parser import build_parser

    parser = build_parser()
    specs: dict[str, list[dict[str, Any]]] = {}

    def actions(p: argparse.ArgumentParser) -> list[dict[str, Any]]:
        out = []
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            out.append({"flags": list(a.option_strings), "dest": a.dest, "nargs": a.nargs,
                        "choices": list(a.choices) if a.choices else None, "required": a.required,
                        "type": getattr(a.type, "__name__", None), "const": isinstance(a, (
                            argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
                            argparse._CountAction)) or a.nargs == 0,
                        "metavar": a.metavar if isinstance(a.metavar, str) else None})
        return out

    specs[""] = actions(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        specs[name] = actions(p)
    return specs


# ----- values --------------------------------------------------------------------------------------------------

DEMO_NODES = ["gpu-l40s-01", "gpu-l40s-05", "gpu-h100-01", "gpu-h100-07", "gpu-a100-01", "gpu-a100-03"]
HOSTILE = ["", " ", "nan", "NaN", "inf", "-inf", "1e999", "-1", "0", "-0", "1e308", "99999999999999999999999",
           "0x10", "1_000", "٣", "\x1b[2J", "\x07", "a\nb", "😀", "a" * 300, "--", "-", "--x", "%s", "{}", "'\"",
           "../..", "../../etc/passwd", "http://[::1", ",", "a,,b", "=", "!", "()", "\\", "*", "~"]
# Per value kind: (values a user means, values that are wrong or hostile). The destination of a flag picks its
# kind; else the name of its type; else a generic one.
VALUES: dict[str, tuple[list[str], list[str]]] = {
    "context": (["a", "b", "a,b", "b,a"], [",", "a,", ",a", "a,,b", "a,a", " , ", "nope", "a b", "\x1b[2J"]),
    "namespace": (["llm", "default", "embeddings"], ["../..", "UPPER", "a" * 64, "a.b", "x-", "ns/x", "kube system"]),
    "prometheus": (["http://127.0.0.1:1", "https://[::1]:1/prom", "http://user:pw@127.0.0.1:1"],
                   ["http://[::1", "ftp://x", "http://", "http://a:0", "http://a:99999", "http://a b", "prom:9090",
                    "http://[zz]:1", "http://a..b", "file:///etc/passwd", "http://a:-1"]),
    "theme": (["gputui-dark", "gputui-mono", "gputui-light", "textual-dark"], ["nope", "../x", "Gputui-Dark", "a b"]),
    "keymap": (["default", "vim", "k9s"], ["emacs", "../default", "VIM"]),
    "service": (["llm/llama-3-70b-instruct", "llama-3-70b-instruct", "llm/mistral-7b", "llm/qwen2-72b",
                 "embeddings/bge-large", "llm/codellama-34b"],
                ["no-such-model", "llm/", "/x", "a/b/c", "LLM/x", "llm/../x", "a b"]),
    "version": (["v1", "v2", "v3", "stable", "canary", "v1.5"], ["v9", "a b", "v1=2", "-"]),
    "nodes": (DEMO_NODES, ["gpu-nope-01", "Gpu_1", "../x", "a..b", "-x"]),
    "drill": (DEMO_NODES, ["gpu-nope-01", "Gpu_1"]),
    "drill_pod": (["llm/llama-3-70b-instruct-v1-x"], ["no-slash", "../x", "llm/", "/p", "LLM/x"]),
    "targets": (["v1=50", "v2=50", "v2=20", "v1=80", "v2=0", "v1=100", "stable=70", "canary=30", "v1=50%"],
                ["v2=120", "v2=-1", "v2=nan", "v2=inf", "=5", "v2", "v2=", "v9=10", "v2=1e-9", "v2=1e999"]),
    "selector": (["app=x", "app==x", "a=b,c=d", "app.kubernetes.io/name=vllm", ""],
                 ["a!=b", "a in (b,c)", "!a", "a", "a=b,a=c", "=x", "a=b c", "a>1", "x/y/z=1", "a=b,"]),
    "confirm_delete": (["gpu-l40s-01", "gpu-l40s-01,gpu-l40s-05"], [",", "Bad_Name", "../x"]),
    "steps": (["5,25,50,100", "11,12", "20", "30,40"], ["50,25", "0,50", "5,nan", "101", "", "5,5"]),
    "host_label": (["Hostname", "hostname", "node"], ["a b", "x) or vector(1", "1abc"]),
    "interval": (["30s", "1m", "15s"], ["0s", "30", "nan", "-1s", "1d"]),
    "host": (["127.0.0.1", "::1", "localhost"], ["0.0.0.0", "example.com", "[::1]", "256.1.1.1", ""]),
    "port": (["8000", "8080"], ["0", "65536", "-1", "http"]),
    "public_host": (["example.com", "1.2.3.4"], ["a:80", "[::1]:1", "bad host"]),
    "tls_cert": (["/nonexistent.pem"], ["/dev/null", ""]),
    "tls_key": (["/nonexistent.key"], ["/dev/null", ""]),
    "kubeconfig": (["/nonexistent/kubeconfig"], ["/dev/null", "", "/"]),
    "rollout": (["promote", "promote-full", "abort", "retry", "undo"], ["bogus"]),
    "output": (["table", "json", "text", "junit"], ["yaml", "JSON"]),
    # by type
    "duration": (["90s", "15m", "1h", "1s", "2s", "500ms", "2d", "1.5m", "10"],
                 ["0", "0s", "-1s", "1e9h", "99999999999h", "nan", "abc", "1h30m", "31d"]),
    "poll": (["1s", "2s", "15s", "1"], ["0", "0.5s", "nan", "-1s"]),
    "seconds": (["1", "2", "2.5", "0.5", "3600"], ["0", "-1", "3601", "nan", "inf", "1e999", "abc"]),
    "positive_seconds": (["1", "2", "2.5", "0.5", "3600"], ["0", "-1", "3601", "nan", "inf", "1e999", "abc"]),
    "_positive_float": (["1", "2", "2.5", "30"], ["0", "-1", "nan", "inf"]),
    "float": (["1", "2.5"], ["nan", "inf", "-1", "abc"]),
    "int": (["0", "1", "2", "7"], ["-1", "99999999999999999999", "1.5", "x"]),
    "whole": (["0", "1", "7", "42"], ["-5", "1e3", "3.5", "99999999999999999999", "1_0"]),
    "count": (["0", "1", "2", "3"], ["-1", "1000001", "1.5", "x"]),
    "multiplier": (["1", "1.5", "2", "3"], ["0", "-1", "nan", "inf", "1001", "-inf"]),
    "idle_below": (["5", "1", "100", "50.5"], ["0", "101", "nan", "-5"]),
    "grace_period": (["-1", "0", "30", "600"], ["-2", "-5", "31536001", "x"]),
    "at_least_one": (["1", "2", "4"], ["0", "-1", "1001"]),
    "seconds_or_zero": (["0", "15", "3600", "2.5"], ["3601", "-1", "nan", "inf"]),
}
GENERIC = (["x", "1", "a-b", "llm", "v1"], HOSTILE)


def kind_of(action: dict[str, Any]) -> tuple[list[str], list[str]]:
    if action["choices"]:
        return [str(c) for c in action["choices"]], ["bogus", ""]
    return VALUES.get(action["dest"]) or VALUES.get(action["type"] or "") or GENERIC


def value_for(action: dict[str, Any], rng: random.Random, bad: bool) -> str:
    good, wrong = kind_of(action)
    if bad:
        return rng.choice(wrong + HOSTILE) if rng.random() < 0.3 else rng.choice(wrong)
    return rng.choice(good)


CONFIG_GOOD = {"refresh": "3", "theme": "gputui-nord", "namespace": "llm", "temp_threshold": "80",
               "prometheus": "http://127.0.0.1:1", "host_label": "hostname", "drain_parallel": "2"}
CONFIG_VALUES = ["1", "0", "-1", "2.5", ".nan", ".inf", "true", "'x'", "{a: 1}", "[a, b]", "~", "2024-13-01",
                 "'http://[::1'", "'../..'", "1e999", "''", "&a [*a]", "'a,b'", "[prod, staging]"]


def config_text(rng: random.Random, bad: bool) -> str:
    from gputui.settings import Settings

    if not bad:
        keys = rng.sample(sorted(CONFIG_GOOD), k=rng.randint(0, 3))
        return "".join(f"{k}: {CONFIG_GOOD[k]}\n" for k in keys)
    keys = [*sorted(Settings.__dataclass_fields__), "colour", "1"]
    lines = [f"{rng.choice(keys)}: {rng.choice(CONFIG_VALUES)}" for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.1:
        lines.append("lol: &l [a,a,a,a,a,a,a,a,a,a]\nl2: &m [*l,*l,*l,*l,*l,*l,*l,*l,*l,*l]\n"
                     "l3: &n [*m,*m,*m,*m,*m,*m,*m,*m,*m,*m]\nl4: [*n,*n,*n,*n,*n,*n,*n,*n,*n,*n]")
    return "\n".join(lines) + "\n"


VALID_SHARE = 0.08  # inputs made of values a user means (the rest carry at least one wrong value or a mutation)


def generate(command: str, index: int, seed: int, specs: dict[str, list[dict[str, Any]]], home: Path,
             unreachable: str) -> tuple[list[str], str | None]:
    """The index-th argv for a command (the same for the same seed), and a config file's text if it uses one.
    About VALID_SHARE of them are what a user would type; the others carry something wrong."""
    rng = random.Random(f"{seed}:{command}:{index}")
    hostile = rng.random() >= VALID_SHARE
    actions = specs[command]
    optional = [a for a in actions if a["flags"] and a["dest"] not in ("version",)]
    positional = [a for a in actions if not a["flags"]]
    where = rng.random()
    cluster = ["--demo"] if where < 0.75 else (["--kubeconfig", unreachable] if where < 0.95 else [])
    if command == "rules":
        cluster = []
    # (flag or None, value or None, was it asked to be wrong): one part is made wrong when the input is hostile
    parts: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
    for a in positional:
        n = 1 if a["nargs"] in (None, 1) else rng.choice([1, 1, 2])
        parts += [(None, "", a)] * n
    for a in rng.sample(optional, k=min(len(optional), rng.choice([0, 1, 1, 2, 2, 3, 4]))):
        parts.append((rng.choice(a["flags"]), None if a["const"] else "", a))
    # The part made wrong (one with a value), or len(parts): a mutation or a bad config file instead.
    carrying = [i for i, (_, value, _) in enumerate(parts) if value is not None]
    wrong = rng.choice([*carrying, len(parts)]) if hostile else -1
    body: list[str] = []
    for i, (flag, value, a) in enumerate(parts):
        bad = i == wrong or (hostile and rng.random() < 0.1)
        if value is not None:
            value = value_for(a, rng, bad)  # type: ignore[arg-type]
        if flag is None:
            if not (bad and rng.random() < 0.1):  # a positional left out
                body.append(value)  # type: ignore[arg-type]
        elif value is None:
            body.append(flag)
        elif flag.startswith("--") and rng.random() < 0.3:
            body.append(f"{flag}={value}")
        else:
            body += [flag, value]
    # Writes on the demo are run too, with time virtual; most are dry runs, and most real ones wait briefly, so a
    # default run stays within minutes (a real drain or canary reads the demo some hundred times).
    if command in ("drain", "shift", "scale-down", "rollout"):
        if rng.random() < 0.85:
            body.append("--dry-run")
        elif command == "drain" and rng.random() < 0.7:
            body += ["--session-deadline", rng.choice(["1s", "2s", "5s"])]
        elif command == "rollout" and rng.random() < 0.7:
            body += ["--steps", rng.choice(["11,12", "20", "30,40"]), "--hold", rng.choice(["1s", "5s"]), "--poll", "1s"]
    if command == "shift" and "--to" not in body and rng.random() < 0.8:
        body += ["--to", rng.choice(VALUES["targets"][0])]
    if rng.random() < 0.005:
        body.append(rng.choice(["--help", "--version", "-h"]))
    config = None
    if rng.random() < 0.08 or (hostile and wrong == len(parts) and rng.random() < 0.5):
        config = config_text(rng, hostile and wrong == len(parts))
        body += ["--config", str(home / "fuzz-config.yaml")]
    before = rng.random() < 0.5  # global flags before or after the command
    name = [command] if command else []
    argv = cluster + name + body if before else name + body + cluster
    if hostile and wrong == len(parts) and config is None and argv:  # a mutation
        i = rng.randrange(len(argv))
        kind = rng.randrange(4)
        if kind == 0:
            del argv[i]
        elif kind == 1:
            argv.insert(i, argv[i])
        elif kind == 2:
            j = rng.randrange(len(argv))
            argv[i], argv[j] = argv[j], argv[i]
        else:
            argv.insert(i, rng.choice([*HOSTILE, "--demo", "--context", "-n", "--prometheus", "--bogus"]))
    return argv, config


# ----- the worker ------------------------------------------------------------------------------------------------

_STATE: dict[str, Any] = {}


class _Capture(io.StringIO):
    def isatty(self) -> bool:
        return False


def _setup(time_limit: float) -> None:
    """Once per worker process: a throwaway HOME, an unreachable kubeconfig, the stubs."""
    home = Path(tempfile.mkdtemp(prefix="gputui-fuzz-"))
    os.chdir(home)  # a relative path an input names (audit_log: x) is written here, never in the repository
    from multiprocessing import util

    util.Finalize(None, shutil.rmtree, args=(str(home), True), exitpriority=10)  # when the worker ends
    for var in [v for v in os.environ if v.startswith("GPUTUI_") or v in ("KUBECONFIG", "NO_COLOR")]:
        del os.environ[var]
    os.environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_STATE_HOME=str(home / ".state"))
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there from now on
    unreachable = home / "unreachable.kubeconfig"
    unreachable.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "fuzz"}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u", "namespace": "llm"}} for n in ("a", "b")],
    }))
    import gputui.cli.parser as parser_module
    import gputui.ui.app as app_module

    started: list[Any] = []

    class StubApp:
        """The TUI, never run: what tui.run reads of the app, and the settings it was given."""
        crash = None
        return_code = 0

        def __init__(self, settings: Any, backend: Any, *_args: Any, **_kwargs: Any) -> None:
            started.append(("tui", settings))
            self.backend = backend

        def run(self) -> None:
            return None

    app_module.GputuiApp = StubApp  # type: ignore[misc]
    try:
        import gputui.cli.serve as serve_module
        import gputui.cli.serve_app as serve_app

        class StubServer:
            def serve(self) -> None:
                started.append(("serve", None))

        serve_app.build_server = lambda *_a, **_k: StubServer()  # type: ignore[assignment]
        serve_module._probe = lambda *_a, **_k: None  # type: ignore[attr-defined]
    except (ImportError, AttributeError):  # serve written otherwise: stub it whole
        import gputui.cli.serve as serve_module

        serve_module.run = lambda settings, args: started.append(("serve", settings)) or 0  # type: ignore[assignment]
    # The demo cluster's warm-up (simulated history before its first read) cut from 180 to 5 simulated seconds:
    # its first read then costs a few milliseconds instead of 80. The commands run as they do; the demo has less
    # history behind it (fewer sessions on its pods).
    import gputui.backends.demo.simulation as simulation

    simulation.WARM_UP_S = 5  # type: ignore[attr-defined]
    # One parser for every input (it is built anew at each start otherwise: most of a refused input's time).
    built = parser_module.build_parser()
    parser_module.build_parser = lambda: built  # type: ignore[assignment]

    def on_alarm(_signum: int, frame: Any) -> None:
        raise Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    _STATE.update(home=home, unreachable=str(unreachable), started=started, time_limit=time_limit,
                  specs=command_specs())


def _one(argv: list[str], config: str | None) -> tuple[str, int | None, str]:
    """(outcome, exit code, detail): outcome ok, waited, crash, hang or exit."""
    from gputui.base import debug_log
    from gputui.cli.main import main

    home: Path = _STATE["home"]
    crash_file = home / ".state" / "gputui" / "crash.log"
    if config is not None:
        (home / "fuzz-config.yaml").write_text(config)
    out, err = _Capture(), _Capture()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    CLOCK.slept, CLOCK.active = 0.0, True
    code: int | None = None
    outcome, detail = "ok", ""
    signal.setitimer(signal.ITIMER_REAL, _STATE["time_limit"])
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's --help and --version
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except Waited:
        outcome, detail = "waited", f"slept {CLOCK.slept:.0f} virtual seconds"
    except Hang:  # its traceback ends where the input was when the limit passed
        if CLOCK.slept >= WAITING_RATE * _STATE["time_limit"]:  # polling as asked, many times: slow, not hung
            outcome, detail = "waited", f"slept {CLOCK.slept:.0f} virtual seconds before the limit"
        else:
            outcome, detail = "hang", traceback.format_exc(limit=-15)
    except BaseException:  # noqa: BLE001 - anything out of main is a finding
        outcome, detail = "crash", traceback.format_exc(limit=20)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        CLOCK.active = False
        sys.stdout, sys.stderr = saved
        with contextlib.suppress(Exception):
            debug_log.stop()
    text = out.getvalue() + err.getvalue()
    if outcome == "ok":
        if crash_file.exists() and crash_file.stat().st_size:
            outcome, detail = "crash", crash_file.read_text(errors="replace")[-3000:]
        elif "Traceback (most recent call last)" in text:
            outcome, detail = "crash", text[text.index("Traceback"):][:3000]
        elif code not in (0, 1, 2):
            outcome, detail = "exit", err.getvalue()[-1000:]
    if crash_file.exists():
        crash_file.unlink()
    return outcome, code, detail


def run_chunk(command: str, start: int, count: int, seed: int, time_limit: float, marker: str) -> dict[str, Any]:
    if not _STATE:
        _setup(time_limit)
    codes: Counter[str] = Counter()
    findings: list[dict[str, Any]] = []
    slowest: tuple[float, list[str]] = (0.0, [])
    began = _real_monotonic()
    for i in range(start, start + count):
        argv, config = generate(command, i, seed, _STATE["specs"], _STATE["home"], _STATE["unreachable"])
        Path(marker).write_text(str(i))  # the input a worker that dies was on
        t0 = _real_monotonic()
        outcome, code, detail = _one(argv, config)
        took = _real_monotonic() - t0
        if took > slowest[0]:
            slowest = (took, argv)
        codes[outcome if outcome in ("waited", "hang", "crash") else str(code)] += 1
        if outcome in ("crash", "hang", "exit"):
            findings.append({"command": command, "index": i, "argv": argv, "config": config, "outcome": outcome,
                             "code": code, "detail": detail})
    stubs = Counter(kind for kind, _ in _STATE["started"])
    _STATE["started"].clear()
    return {"command": command, "count": count, "codes": dict(codes), "findings": findings, "stubs": dict(stubs),
            "seconds": _real_monotonic() - began, "slowest": slowest, "threads": threading.active_count()}


def replay(command: str, index: int, seed: int, time_limit: float) -> int:
    """One input again, its argv and output shown (--replay)."""
    _setup(time_limit)
    argv, config = generate(command, index, seed, _STATE["specs"], _STATE["home"], _STATE["unreachable"])
    print("gputui " + " ".join(map(repr, argv)))
    if config:
        print("config:\n" + config)
    outcome, code, detail = _one(argv, config)
    print(f"outcome {outcome}, exit {code}\n{detail}")
    return 0


# ----- the parent -------------------------------------------------------------------------------------------------


class Run:
    """The parent's tally."""

    def __init__(self, commands: list[str]) -> None:
        self.totals: dict[str, Counter[str]] = defaultdict(Counter)
        self.findings: list[dict[str, Any]] = []
        self.busy: dict[str, float] = defaultdict(float)
        self.slowest: dict[str, tuple[float, list[str]]] = {}
        self.threads = 0
        self.done = 0
        self.stubs: Counter[str] = Counter()
        self.commands = commands

    def add(self, result: dict[str, Any]) -> None:
        c = result["command"]
        self.totals[c].update(result["codes"])
        self.findings += result["findings"]
        self.busy[c] += result["seconds"]
        self.threads = max(self.threads, result["threads"])
        self.stubs.update(result["stubs"])
        if result["slowest"][0] > self.slowest.get(c, (0.0, []))[0]:
            self.slowest[c] = result["slowest"]
        self.done += result["count"]


def run_tasks(tasks: list[tuple[str, int, int]], jobs: int, seed: int, time_limit: float, tally: Run,
              total: int, began: float) -> list[tuple[str, int]]:
    """Run the tasks on a pool of `jobs` workers; returns (command, index) of inputs a worker died on (each after
    it was tried again alone), the rest of their chunks run too."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    markers = Path(tempfile.mkdtemp(prefix="gputui-fuzz-markers-"))
    died: list[tuple[str, int]] = []
    queue = list(tasks)
    try:
        while queue:
            suspects: list[tuple[str, int, int]] = []
            with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
                futures = {pool.submit(run_chunk, c, s, n, seed, time_limit, str(markers / f"{c}-{s}")): (c, s, n)
                           for c, s, n in queue}
                queue = []
                while futures:
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for future in finished:
                        c, s, n = futures.pop(future)
                        try:
                            tally.add(future.result())
                        except BrokenProcessPool:  # some worker died: every chunk running then is suspect
                            marker = markers / f"{c}-{s}"
                            at = int(marker.read_text()) if marker.exists() else s
                            suspects.append((c, at, 1))
                            if s + n > at + 1:
                                queue.append((c, at + 1, s + n - at - 1))
                            if at > s:
                                queue.append((c, s, at - s))  # (run again: its results were lost with it)
                            continue
                        print(f"  {tally.done:,}/{total:,} inputs, {tally.done / (time.perf_counter() - began):,.0f}/s",
                              end="\r", flush=True)
            for c, at, _ in suspects:  # each alone, in a pool of its own: which one kills a worker
                with ProcessPoolExecutor(max_workers=1, mp_context=context) as alone:
                    try:
                        tally.add(alone.submit(run_chunk, c, at, 1, seed, time_limit, str(markers / "alone")).result())
                    except BrokenProcessPool:
                        died.append((c, at))
                        tally.totals[c]["died"] += 1
                        tally.done += 1
    finally:
        shutil.rmtree(markers, ignore_errors=True)
    return died


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=10_000, help="inputs per command (default 10,000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: the CPUs)")
    ap.add_argument("--time-limit", type=float, default=30.0, help="real seconds an input may take (default 30)")
    ap.add_argument("--chunk", type=int, default=250, help="inputs per task")
    ap.add_argument("--commands", help="comma-separated; 'tui' for the bare TUI (default: every command)")
    ap.add_argument("--show", type=int, default=3, help="findings shown in full per command and kind")
    ap.add_argument("--replay", metavar="COMMAND:INDEX", help="run one input again and show it (tui:INDEX for the TUI)")
    args = ap.parse_args()
    if args.replay:
        command, _, index = args.replay.rpartition(":")
        return replay("" if command == "tui" else command, int(index), args.seed, args.time_limit)

    specs = command_specs()
    commands = list(specs)
    if args.commands:
        wanted = ["" if c == "tui" else c for c in args.commands.split(",")]
        commands = [c for c in commands if c in wanted]
    tasks = [(c, s, min(args.chunk, args.budget - s)) for c in commands for s in range(0, args.budget, args.chunk)]
    random.Random(args.seed).shuffle(tasks)  # every worker gets a mix: slow commands are not all at the end
    total = len(commands) * args.budget
    print(f"fuzz-cli: {len(commands)} commands x {args.budget:,} inputs, {args.jobs} workers, seed {args.seed}, "
          f"time limit {args.time_limit:g}s per input", flush=True)
    tally = Run(commands)
    began = time.perf_counter()
    died = run_tasks(tasks, args.jobs, args.seed, args.time_limit, tally, total, began)
    wall = time.perf_counter() - began
    for c, at in died:
        argv, config = generate(c, at, args.seed, specs, Path("$HOME"), "$HOME/unreachable.kubeconfig")
        tally.findings.append({"command": c, "index": at, "argv": argv, "config": config, "outcome": "died",
                               "code": None, "detail": "the worker process died on this input (twice)"})
    print(" " * 60, end="\r")
    kinds = ("0", "1", "2", "waited", "crash", "hang", "died")
    print(f"{'command':12s} {'inputs':>8s} " + " ".join(f"{k:>7s}" for k in kinds) + "   other  worker-s  slowest")
    for c in commands:
        row = tally.totals[c]
        other = sum(v for k, v in row.items() if k not in kinds)
        print(f"{c or '(tui)':12s} {sum(row.values()):8,d} " + " ".join(f"{row.get(k, 0):7,d}" for k in kinds)
              + f" {other:7,d} {tally.busy[c]:9.1f} {tally.slowest.get(c, (0.0,))[0]:7.2f}s")
    done = sum(sum(c.values()) for c in tally.totals.values())
    print(f"total: {done:,} inputs in {wall:.1f}s wall, {done / wall:,.0f} inputs/s ({args.jobs} workers); "
          f"the TUI stub started {tally.stubs['tui']:,} times, serve's {tally.stubs['serve']:,}; "
          f"most threads alive after a chunk: {tally.threads}")
    if not tally.findings:
        print("findings: none (no traceback, no hang, no exit code outside 0, 1, 2, no worker died)")
        return 0
    print(f"findings: {len(tally.findings)} (replay one: --replay COMMAND:INDEX --seed {args.seed})")
    shown: Counter[tuple[str, str]] = Counter()
    for f in tally.findings:
        key = (f["command"], f["outcome"])
        shown[key] += 1
        if shown[key] > args.show:
            continue
        print(f"--- {f['outcome']} (exit {f['code']}) in {f['command'] or 'tui'}:{f['index']}: "
              f"gputui {' '.join(map(repr, f['argv'] or []))}")
        if f.get("config"):
            print("    config: " + json.dumps(f["config"]))
        print("    " + "\n    ".join(str(f["detail"]).strip().splitlines()[-12:]))
    return 1


if __name__ == "__main__":
    sys.exit(main())
