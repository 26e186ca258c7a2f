"""Whether a Karpenter NodePool budget's schedule window is open now, exactly as Karpenter decides it. Pure.

Karpenter (sigs.k8s.io/karpenter v1.13.0, pkg/apis/v1/nodepool.go, `Budget.IsActive`) parses the schedule with
github.com/robfig/cron/v3 v3.0.1 `cron.ParseStandard("TZ=UTC " + schedule)` and decides:

    checkPoint := now.UTC().Add(-duration)
    nextHit := schedule.Next(checkPoint)
    return !nextHit.After(now.UTC())

so a window is open when a hit h has checkPoint < h <= now (robfig's Next starts at the second after its
argument: a hit exactly `duration` ago has closed its window, whatever the comment above IsActive says). The cron
rules mirrored here are robfig/cron v3.0.1's (parser.go, spec.go): five fields (minute hour day-of-month month
day-of-week), `*` and `?`, ranges `a-b`, steps `/n`, lists, month names jan..dec and day names sun..sat (any case),
day-of-week 0..6 (7 is refused); day-of-month and day-of-week are ANDed when either field carries the star bit
(`*`, `?`, or `*/1`; `*/2` drops it) and ORed otherwise; descriptors @yearly, @annually, @monthly, @weekly, @daily,
@midnight, @hourly (Karpenter's CRD pattern allows no other). Next gives up five years after its argument and
returns Go's zero time, which is not after now: a schedule that never hits is open for ever (Karpenter's own
quirk, kept). A schedule that does not parse is an error: Karpenter then allows 0 disruptions (fail closed).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

STAR = "*"
_MONTHS = {n: i for i, n in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                       "dec"), start=1)}
_DAYS = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (min, max, names) per field, robfig's bounds
_BOUNDS: tuple[tuple[int, int, dict[str, int] | None], ...] = (
    (0, 59, None), (0, 23, None), (1, 31, None), (1, 12, _MONTHS), (0, 6, _DAYS))
_DESCRIPTORS = {  # robfig's parseDescriptor, seconds dropped (always 0)
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class ScheduleError(ValueError):
    """A schedule or duration Karpenter could not parse (it then allows no disruption)."""


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]
    dom_star: bool
    dow_star: bool

    def day_matches(self, day: datetime) -> bool:
        dom, dow = day.day in self.doms, (day.weekday() + 1) % 7 in self.dows  # Go: Sunday = 0
        return dom and dow if self.dom_star or self.dow_star else dom or dow


def parse_cron(spec: str) -> Cron:
    """robfig/cron's ParseStandard (descriptors included); ScheduleError when it would refuse the spec."""
    text = spec.strip()
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise ScheduleError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {spec!r}")
    parsed = [_field(f, *bounds) for f, bounds in zip(fields, _BOUNDS, strict=True)]
    return Cron(parsed[0][0], parsed[1][0], parsed[2][0], parsed[3][0], parsed[4][0], parsed[2][1], parsed[4][1])


def _field(text: str, low: int, high: int, names: dict[str, int] | None) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for expr in (e for e in text.split(",") if e):  # Go's FieldsFunc drops empty parts
        got, is_star = _range(expr, low, high, names)
        values |= got
        star = star or is_star
    return frozenset(values), star


def _range(expr: str, low: int, high: int, names: dict[str, int] | None) -> tuple[set[int], bool]:
    range_and_step = expr.split("/")
    bounds = range_and_step[0].split("-")
    star = bounds[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        start = _number(bounds[0], names)
        if len(bounds) == 1:
            end = start
        elif len(bounds) == 2:
            end = _number(bounds[1], names)
        else:
            raise ScheduleError(f"too many hyphens: {expr}")
    step = 1
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], None)
        if len(bounds) == 1:
            end = high
        if step > 1:
            star = False
    elif len(range_and_step) > 2:
        raise ScheduleError(f"too many slashes: {expr}")
    if start < low or end > high or start > end or step == 0:
        raise ScheduleError(f"out of range: {expr}")
    return set(range(start, end + 1, step)), star


def _number(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    try:
        value = int(text)
    except ValueError:
        raise ScheduleError(f"failed to parse int from {text}") from None
    if value < 0:
        raise ScheduleError(f"negative number ({value}) not allowed: {text}")
    return value


def go_duration(text: str) -> float:
    """Seconds in a Go duration ("8h", "1h30m", "90m0s"), as time.ParseDuration reads it; ScheduleError if not one."""
    t = text.strip()
    if t in ("0", ""):
        if t == "0":
            return 0.0
        raise ScheduleError("empty duration")
    pos, total = 0, 0.0
    for m in _GO_DURATION.finditer(t):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(t) or pos == 0:
        raise ScheduleError(f"invalid duration {text!r}")
    return total


def window_open(schedule: str, duration: str, now: float) -> bool:
    """Karpenter's IsActive: a hit within (now - duration, now]; a schedule that never hits within five years
    of (now - duration) is open (Go's zero time is not after now). ScheduleError when either does not parse."""
    cron = parse_cron(schedule)
    span = go_duration(duration)
    now_t = datetime.fromtimestamp(int(now), tz=UTC)  # whole seconds: cron hits are on the minute
    check = datetime.fromtimestamp(now - span, tz=UTC)
    hit = _next_hit(cron, check, limit_year=check.year + 5)
    return hit is None or hit <= now_t


def _next_hit(cron: Cron, after: datetime, limit_year: int) -> datetime | None:
    """The first minute strictly after `after` that the schedule hits, up to the end of `limit_year`."""
    start = (after.replace(second=0, microsecond=0) + timedelta(minutes=1))
    day = start.replace(hour=0, minute=0)
    while day.year <= limit_year:
        if day.month in cron.months and cron.day_matches(day):
            for hour in sorted(cron.hours):
                for minute in sorted(cron.minutes):
                    at = day.replace(hour=hour, minute=minute)
                    if at >= start:
                        return at
        day = _next_day(day)
    return None


def _next_day(day: datetime) -> datetime:
    last = calendar.monthrange(day.year, day.month)[1]
    return day + timedelta(days=1) if day.day < last else \
        (day.replace(day=1, month=day.month + 1) if day.month < 12 else day.replace(day=1, month=1, year=day.year + 1))
