"""gputui's cordon record (issue 40 item 2): who cordoned a node through gputui, why, under which ticket, since
when and until when. One node annotation, gputui.vocabulary.disruptions.CORDON_RECORD, compact JSON. Pure.

Checked both ways. What a person types is refused before anything is sent: a reason is required, at most
CORDON_REASON_MAX characters, one line, no control character, and nothing that looks like a credential (the
annotation is readable by anyone who may read nodes, and lives as long as the cordon). What is read back from a
Node is data from outside (anyone who may patch nodes can write it): cut to the same bounds, control characters
made visible, times that are not times dropped; an annotation that is not a record says so (`problem`), it is
never taken for gputui's own.
"""

from __future__ import annotations

import calendar
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gputui.base import validate
from gputui.base.safe_text import visible
from gputui.vocabulary.disruptions import (
    CORDON_BY_MAX,
    CORDON_EXPIRY_MAX_S,
    CORDON_REASON_MAX,
    CORDON_RECORD,
    CORDON_TICKET_MAX,
)

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # as the drain record's gputui.io/drain-started

# What a credential looks like, to refuse it in a reason or ticket: a JWT (every service-account token), an HTTP
# bearer header, `password=…`-like pairs, an AWS access key ID, a GitHub token, a PEM private key, and a long run of
# mixed-case letters and digits (an API key; a git hash is one case and passes).
_SECRET = re.compile(
    r"(?i:eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|\bbearer\s+\S{8,}"
    r"|\b(?:password|passwd|pwd|secret|token|api[-_]?key|access[-_]?key)\s*[:=]\s*\S+"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
    r"|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|(?<![A-Za-z0-9+/_=-])(?=[A-Za-z0-9+/_=-]*[a-z])(?=[A-Za-z0-9+/_=-]*[A-Z])(?=[A-Za-z0-9+/_=-]*[0-9])"
    r"[A-Za-z0-9+/_=-]{32,}"
)
_DURATION_LIKE = re.compile(r"[0-9.]+\s*(ms|s|m|h|d)?")


DIAG_VERDICTS = ("pass", "fail", "warn", "unknown")
DIAG_SUMMARY_MAX = 300  # the summary's characters on the Node (the failing tests in words, cut)


@dataclass(frozen=True, slots=True)
class DiagNote:
    """The last DCGM diagnostic's verdict on the node (issue 37 item 4), kept on its cordon record."""

    verdict: str  # pass, fail, warn or unknown
    when: float | None  # epoch seconds
    summary: str  # one line: DCGM's summary, or the failing tests, or why it is unknown

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "when": stamp(self.when), "summary": self.summary}

    def words(self) -> str:
        when = f" at {shown_time(self.when)}" if self.when is not None else ""
        return f"DCGM diagnostic {self.verdict}{when}" + (f": {self.summary}" if self.summary else "")


def diag_note(verdict: str, when: float, summary: str) -> DiagNote:
    """A note to write: the verdict checked, the summary made one line and cut (it holds DCGM's words)."""
    return DiagNote(verdict if verdict in DIAG_VERDICTS else "unknown", when,
                    visible(" ".join(str(summary).split()), DIAG_SUMMARY_MAX))


def _read_diag(value: Any) -> DiagNote | None:
    if not isinstance(value, dict):
        return None
    verdict = value.get("verdict")
    summary = value.get("summary")
    return DiagNote(verdict if verdict in DIAG_VERDICTS else "unknown", _read_time(value.get("when")),
                    visible(summary.strip(), DIAG_SUMMARY_MAX) if isinstance(summary, str) else "")


@dataclass(frozen=True, slots=True)
class CordonRecord:
    by: str  # the identity the audit log names (the writer's: SelfSubjectReview, or the kubeconfig user)
    reason: str
    since: float | None  # epoch seconds; None: not readable
    ticket: str = ""
    expires: float | None = None  # epoch seconds; None: no expiry
    problem: str = ""  # the annotation is there but is no record: why (then nothing else is known)
    diag: DiagNote | None = None  # the last diagnostic run on the node while cordoned (None: none run)

    def to_annotation(self) -> str:
        data: dict[str, Any] = {"by": self.by, "reason": self.reason, "since": stamp(self.since)}
        if self.ticket:
            data["ticket"] = self.ticket
        if self.expires is not None:
            data["expires"] = stamp(self.expires)
        if self.diag is not None:
            data["diag"] = self.diag.to_dict()
        return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    def expired(self, now: float) -> bool:
        return self.expires is not None and not self.problem and now >= self.expires

    def to_dict(self) -> dict[str, Any]:
        """For -o json and the audit log: times as epoch seconds, empty as null."""
        return {"by": self.by or None, "reason": self.reason or None, "ticket": self.ticket or None,
                "since": self.since, "expires": self.expires, "problem": self.problem or None,
                "diag": None if self.diag is None else {**self.diag.to_dict(), "when": self.diag.when}}

    def words(self, now: float | None = None) -> str:
        """`alice: kernel 6.8 rollout (ticket OPS-12), since 2026-12-03 10:00 UTC, expires 2026-12-04 10:00 UTC`."""
        if self.problem:
            return f"a gputui cordon record that cannot be read ({self.problem})"
        text = f"{self.by or 'unknown'}: {self.reason or '(no reason)'}"
        if self.ticket:
            text += f" (ticket {self.ticket})"
        if self.since is not None:
            text += f", since {shown_time(self.since)}"
        if self.expires is not None:
            late = now is not None and now >= self.expires
            text += f", {'expired' if late else 'expires'} {shown_time(self.expires)}"
        return text


def stamp(when: float | None) -> str | None:
    return None if when is None else time.strftime(TIME_FORMAT, time.gmtime(when))


def shown_time(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))


def _one_line(text: str, what: str, limit: int) -> str:
    """`text` stripped, checked: one line, no control character, at most `limit` characters, no credential."""
    out = str(text).strip()
    if visible(out, None) != out:
        raise ValueError(f"the {what} holds a control character or a line break: write it on one line")
    if len(out) > limit:
        raise ValueError(f"the {what} is {len(out)} characters: at most {limit}")
    if _SECRET.search(out):
        raise ValueError(f"the {what} looks like it holds a credential: it would be written on the Node, which "
                         "anyone who may read nodes can read; leave it out")
    return out


def clean_reason(text: str) -> str:
    """The reason a person typed, checked (ValueError in one line naming what is wrong)."""
    out = _one_line(text, "reason", CORDON_REASON_MAX)
    if not out:
        raise ValueError("a reason is required: say why the node is cordoned")
    return out


def clean_ticket(text: str) -> str:
    """The ticket (optional: "" stays ""), checked as the reason is."""
    return _one_line(text, "ticket", CORDON_TICKET_MAX)


def parse_expiry(text: str, now: float) -> float | None:
    """When the cordon expires, from `4h`, `2d`, `90m` (from now) or an ISO date or date-time (UTC unless it says
    otherwise: `2026-12-24`, `2026-12-24T18:00`, `2026-12-24T18:00+01:00`); "" is no expiry. ValueError when it
    is neither, is past, or is more than a year ahead."""
    raw = str(text).strip()
    if not raw:
        return None
    if _DURATION_LIKE.fullmatch(raw):
        try:
            return float(round(now + validate.duration(raw, at_most=CORDON_EXPIRY_MAX_S)))  # the record's resolution
        except ValueError as exc:
            raise ValueError(f"expiry {raw[:40]!r}: {exc}") from None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"expiry {raw[:40]!r} is neither a duration (4h, 2d) nor an ISO date "
                         "(2026-12-24, 2026-12-24T18:00Z)") from None
    at = (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()
    if at <= now:
        raise ValueError(f"expiry {raw!r} is in the past")
    if at - now > CORDON_EXPIRY_MAX_S:
        raise ValueError(f"expiry {raw!r} is more than a year ahead")
    return at


def _read_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        out = float(calendar.timegm(time.strptime(value, TIME_FORMAT)))
    except (ValueError, OverflowError):
        return None
    return out if math.isfinite(out) and out > 0 else None


def read_record(annotations: Mapping[str, str]) -> CordonRecord | None:
    """The node's record; None when it has none. Hostile or broken text never raises: it is cut, made visible, or
    named as unreadable."""
    raw = annotations.get(CORDON_RECORD)
    if raw is None:
        return None
    try:
        data = json.loads(raw) if len(raw) <= 16 * 1024 else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("by"), str) or not data["by"].strip():
        return CordonRecord("", "", None, problem=f"{CORDON_RECORD} is not a record: {visible(raw, 80)}")

    def text(key: str, limit: int) -> str:
        value = data.get(key)
        return visible(value.strip(), limit) if isinstance(value, str) else ""

    return CordonRecord(text("by", CORDON_BY_MAX), text("reason", CORDON_REASON_MAX), _read_time(data.get("since")),
                        text("ticket", CORDON_TICKET_MAX), _read_time(data.get("expires")),
                        diag=_read_diag(data.get("diag")))
