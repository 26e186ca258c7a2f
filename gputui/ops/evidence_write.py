"""The evidence bundle as a file: SUMMARY.md in words, a MANIFEST of every file and of what was left out and why,
the parts as JSON, in a .tar.gz readable by its owner alone (0600) that never replaces a file unless asked.

Whatever the cluster wrote is data: the names inside the archive are gputui's (gputui.ops.evidence.PARTS'
names), the JSON is ASCII with every other character escaped, and the summary's text passes
gputui.base.safe_text.visible (no control character, no terminal escape)."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from gputui.base.paths import state_dir
from gputui.base.safe_text import visible
from gputui.ops.evidence import Evidence
from gputui.ops.evidence_clean import LEFT_OUT
from gputui.policy.fault_peers import DEFAULT_WINDOW_S, window_words
from gputui.vocabulary.gpu_faults import NOT_COLLECTED, faults_of

ROOT = "evidence"  # the one directory inside the archive
SIMULATED = "SIMULATED: the demo cluster, nothing here is real"
WORST_SHOWN = 8


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def default_path(node: str, taken_at: float) -> Path:
    """Under the user's state directory; the node's name made file-safe (it is cluster text)."""
    safe = re.sub(r"[^A-Za-z0-9.-]", "_", node)[:100].lstrip(".") or "node"
    return state_dir() / "evidence" / f"{safe}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(taken_at))}.tar.gz"


def _held(ev: Evidence) -> list[str]:
    actors = ev.part("actors.json").data or {}
    out = [f"- {visible(d['actor'])}: {visible(d['phase'])}: {visible(d['why'])}"
           + (f" (stuck: {visible(d['stuck'])})" if d.get("stuck") else "") for d in actors.get("disruptions", [])]
    upgrade = actors.get("upgrade") or {}
    if upgrade.get("state"):
        out.append(f"- GPU Operator driver upgrade state: {visible(upgrade['state'])}"
                   + (f" (stuck: {visible(upgrade['stuck'])})" if upgrade.get("stuck") else ""))
    return out or ["- no actor holds the node"]


def _faults(ev: Evidence) -> list[str]:
    found = sorted(((f.rank, g.index, g.uuid, f) for g in ev.gpus for f in faults_of(g)
                    if f.category not in ("informational", NOT_COLLECTED)), key=lambda t: t[:2])
    lines = [f"- GPU {i} ({visible(uuid) or 'no UUID'}): {visible(f.words)}; action: {visible(f.action)} "
             f"[{f.category}]" for _r, i, uuid, f in found[:WORST_SHOWN]]
    if len(found) > WORST_SHOWN:
        lines.append(f"- and {len(found) - WORST_SHOWN} more (faults.json)")
    missing = sorted({name for g in ev.gpus for f in faults_of(g) if f.category == NOT_COLLECTED for name in f.fields})
    if missing:
        lines.append(f"- not collected by the exporter (unknown, not healthy): {', '.join(missing)}")
    if not ev.gpus:
        lines.append("- no GPU reported: faults are unknown (no DCGM series for the node)")
    return lines or ["- no fault that asks for an action"]


def _peers(ev: Evidence) -> list[str]:
    if ev.peers_unknown:
        return [f"- unknown: the counts could not be read ({visible(ev.peers_unknown)})"]
    return [f"- {visible(line)}" for line in ev.peers] or ["- no GPU of the node counted"]


def _pods(ev: Evidence) -> list[str]:
    part = ev.part("pods.json")
    if part.missing:
        return [f"- unknown: the pods could not be read ({visible(part.missing)})"]
    lines = []
    for p in part.data:
        meta, ours = p.get("metadata") or {}, p.get("gputui") or {}
        units = ", ".join(f"{visible(k)} {v}" for k, v in (ours.get("gpu_units") or {}).items()) or "no GPU"
        dcgm = p.get("dcgm_gpus")
        lines.append(f"- {visible(meta.get('namespace'))}/{visible(meta.get('name'))}: "
                     f"{visible(ours.get('service') or '-')} {visible(ours.get('version') or '')}".rstrip()
                     + f"; {units}; DCGM GPUs {'unknown' if dcgm is None else dcgm or 'none'}; "
                     f"sessions {visible(ours.get('sessions', 'unknown'))}")
    return lines or ["- no pod on the node"]


def missing_by_reason(ev: Evidence) -> list[tuple[str, str]]:
    """(reason, the parts' names) for the parts that could not be read, one line per reason (a Prometheus down
    fails every DCGM family alike)."""
    grouped: dict[str, list[str]] = {}
    for p in ev.missing:
        grouped.setdefault(p.missing, []).append(p.name)
    return [(why, ", ".join(names)) for why, names in grouped.items()]


def summary(ev: Evidence) -> str:
    n = ev.model
    ready = "Ready" if n.ready else "NotReady"
    lines = [f"# Evidence: node {visible(ev.node)}", ""]
    if ev.simulated:
        lines += [f"**{SIMULATED}**", ""]
    lines += [f"Context {visible(ev.context)}, read at {_utc(ev.taken_at)} by gputui.", "",
              "## State", "",
              f"- {ready}, {'cordoned' if n.unschedulable else 'schedulable'}; {visible(n.gpu_product) or 'GPU model unknown'}, "
              f"{len(ev.gpus)} GPU{'s' * (len(ev.gpus) != 1)} reporting; driver {visible(n.driver_version) or 'unknown'}",
              *(f"- condition {visible(c.type)}={visible(c.status)}" + (f" ({visible(c.reason)})" if c.reason else "")
                for c in n.conditions if (c.type == "Ready") != (c.status == "True")),
              "", "## Who holds it", "", *_held(ev),
              "", "## Worst faults, with the action", "", *_faults(ev),
              "", f"## GPU fault counts over {window_words(DEFAULT_WINDOW_S)} against the other nodes of its pool", "",
              *_peers(ev),
              "", "## Pods and live sessions", "", *_pods(ev),
              "", "## Left out, and why", "",
              *(f"- MISSING {names}: {visible(why)}" for why, names in missing_by_reason(ev)),
              *(f"- {visible(note)}" for note in ev.notes),
              *(f"- {what}: {why}" for what, why in LEFT_OUT), ""]
    return "\n".join(lines)


def manifest(ev: Evidence) -> str:
    lines = [f"gputui evidence bundle of node {visible(ev.node)}, context {visible(ev.context)}, {_utc(ev.taken_at)}"]
    if ev.simulated:
        lines.append(SIMULATED)
    lines += ["", "FILES", "SUMMARY.md\tthe node in words", "MANIFEST\tthis list"]
    lines += [f"{p.name}\t{visible(p.what)}" for p in ev.parts if not p.missing]
    lines += ["", "MISSING (could not be read; the bundle was written without them)"]
    lines += [f"{p.name}\t{visible(p.missing)}" for p in ev.parts if p.missing] or ["none"]
    lines += ["", "NOTES", *(visible(n) for n in ev.notes)] if ev.notes else []
    lines += ["", "LEFT OUT (on purpose)", *(f"{what}\t{why}" for what, why in LEFT_OUT), ""]
    return "\n".join(lines)


def done_line(ev: Evidence, path: Path) -> str:
    """What the CLI prints and the TUI notifies once the file is written."""
    tag = f"{SIMULATED}: " if ev.simulated else ""
    n = len(ev.missing)
    missing = f"; {n} part{'s' * (n != 1)} missing (see its MANIFEST)" if n else ""
    return f"{tag}evidence of node {visible(ev.node)} written to {path}{missing}"


def _json(data: Any) -> bytes:
    # ASCII: every character a terminal or an editor could act on is a JSON escape; the values stay the same.
    return (json.dumps(data, indent=1, ensure_ascii=True, default=str) + "\n").encode()


def archive(ev: Evidence) -> bytes:
    buf = io.BytesIO()
    files = [("SUMMARY.md", summary(ev).encode()), ("MANIFEST", manifest(ev).encode()),
             *((p.name, _json(p.data)) for p in ev.parts if not p.missing)]
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, body in files:
            info = tarfile.TarInfo(f"{ROOT}/{name}")
            info.size, info.mode, info.mtime = len(body), 0o600, int(ev.taken_at)
            info.uname = info.gname = "gputui"
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def write(path: Path, body: bytes, force: bool = False) -> None:
    """Mode 0600, whole or not at all (a temporary file beside it, then linked in). An existing file is
    FileExistsError unless `force` (then replaced)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)  # 0600, a fresh name
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)  # whatever the umask
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        if force:
            os.replace(temp, path)
            return
        try:
            os.link(temp, path)  # FileExistsError when something is there: never replaced
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: created only if absent, then written
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(body)
    finally:
        temp.unlink(missing_ok=True)
