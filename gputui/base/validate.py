"""What a user types, checked: numbers, durations, counts, names, namespaces, contexts, Prometheus URLs.

The one home of these rules: the flags' argparse types (gputui.cli.arguments) and the settings from the config
file and GPUTUI_* variables (gputui.settings) both call them. Each returns the clean value or raises ValueError
with a one-line reason that names no source: the caller says which flag, key or variable it was.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any
from urllib.parse import urlsplit

MAX_DURATION_S = 30 * 24 * 3600.0  # a hold, a deadline, a window: a month is more than any of them means
MAX_COUNT = 1_000_000
_WHOLE = re.compile(r"[+-]?[0-9]{1,18}")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,4})?")
_DURATION = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)(ms|s|m|h|d)?")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
# Kubernetes names (apimachinery validation): a DNS-1123 label (namespaces) and subdomain (nodes, pods).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PROM_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,127}")
_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")


def _shown(value: Any) -> str:
    """The value as the error quotes it: text in quotes, anything else as Python writes it; cut at 40."""
    if isinstance(value, str):
        return repr(value[:40] + "…") if len(value) > 40 else repr(value)
    text = repr(value)
    return text[:40] + "…" if len(text) > 40 else text


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in text)


def number(value: Any) -> float:
    """A finite number from a YAML number or the text of one (a flag, a variable); never a bool, NaN or ±inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{_shown(value)} is not a number")
    if isinstance(value, str):
        text = value.strip()
        if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise ValueError(f"{_shown(value)} is not a finite number")
        if not _NUMBER.fullmatch(text):
            raise ValueError(f"{_shown(value)} is not a number")
        value = text
    try:
        out = float(value)
    except (OverflowError, ValueError):
        raise ValueError(f"{_shown(value)} is not a number") from None
    if not math.isfinite(out):
        raise ValueError(f"{_shown(value)} is not a finite number")
    return out


def whole(value: Any) -> int:
    """A whole number from a YAML integer or its text (ASCII digits only: no '1_000', no '١')."""  # noqa: RUF002 - an Arabic-Indic digit, on purpose
    if isinstance(value, bool):
        raise ValueError(f"{_shown(value)} is not a whole number")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError(f"{_shown(value)} is not a whole number")


def count(value: Any, *, at_least: int = 0, at_most: int = MAX_COUNT) -> int:
    n = whole(value)
    if not at_least <= n <= at_most:
        raise ValueError(f"must be {_range(at_least, at_most)}, got {n}")
    return n


def _range(low: float, high: float) -> str:
    if high >= MAX_COUNT:
        return f"{low:g} or more" if low <= 0 else f"at least {low:g}"
    return f"between {low:g} and {high:g}"


def seconds(value: Any, *, zero_ok: bool = False, at_most: float = MAX_DURATION_S) -> float:
    """A number of seconds: above 0 (or 0 with zero_ok), at most `at_most`."""
    s = number(value)
    if s < 0 or (s == 0 and not zero_ok):
        raise ValueError(f"must be {'0 or more' if zero_ok else 'a positive number of'} seconds, got {s:g}")
    if s > at_most:
        raise ValueError(f"must be at most {at_most:g} seconds, got {s:g}")
    return s


def duration(value: Any, *, at_least: float = 0.0, at_most: float = MAX_DURATION_S) -> float:
    """'90s', '15m', '1h', '2d', '500ms' or plain seconds -> seconds: above 0 (and `at_least`), at most a month."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{_shown(value)} is not a duration (e.g. 90s, 15m, 1h)")
    if isinstance(value, str):
        m = _DURATION.fullmatch(value.strip())
        if not m:
            raise ValueError(f"{_shown(value)} is not a duration (e.g. 90s, 15m, 1h)")
        s = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        s = number(value)
    if not s > 0 or s < at_least:
        raise ValueError(f"must be at least {at_least:g}s, got {_shown(value)}" if at_least
                         else f"must be longer than 0, got {_shown(value)}")
    if s > at_most:
        raise ValueError(f"must be at most {at_most / 3600:g}h, got {_shown(value)}")
    return s


def multiplier(value: Any, *, at_most: float = 1000.0) -> float:
    """A gate's factor: a finite number above 0 (NaN or inf would switch the gate off)."""
    x = number(value)
    if not 0 < x <= at_most:
        raise ValueError(f"must be above 0 and at most {at_most:g}, got {x:g}")
    return x


def percent(value: Any, *, zero_ok: bool = True) -> float:
    """A percentage 0..100 (above 0 unless zero_ok); a trailing '%' is allowed."""
    if isinstance(value, str):
        value = value.strip().removesuffix("%").strip()
    p = number(value)
    if not (0 <= p <= 100) or (p == 0 and not zero_ok):
        raise ValueError(f"must be {'between 0' if zero_ok else 'above 0'} and 100, got {p:g}")
    return p


def text(value: Any, *, what: str = "text", limit: int = 4096) -> str:
    """A string with no control characters (a YAML number or mapping where text is expected is refused)."""
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, got {type(value).__name__} {_shown(value)}")
    if _has_control(value):
        raise ValueError(f"{_shown(value)} holds control characters")
    if len(value) > limit:
        raise ValueError(f"longer than {limit} characters")
    return value


def path(value: Any) -> str:
    """A file's path the file system can take: no control character, each part at most 255 bytes, the whole at
    most 4096 (a longer one made os.stat raise where a missing file was expected)."""
    name = text(value, what="a path").strip()
    raw = name.encode("utf-8", "surrogateescape")
    if not raw or len(raw) > 4096 or any(len(part) > 255 for part in raw.split(b"/")):
        raise ValueError(f"{_shown(value)} is not a usable path (empty, or a part over 255 bytes, or over 4096)")
    return name


def namespace(value: Any) -> str:
    """A Kubernetes namespace: a DNS-1123 label (lowercase letters, digits and '-', at most 63)."""
    name = text(value, what="a namespace").strip()
    if not _DNS_LABEL.fullmatch(name):
        raise ValueError(f"{_shown(value)} is not a namespace (lowercase letters, digits and '-', at most 63, "
                         "starting and ending with a letter or digit)")
    return name


def object_name(value: Any, what: str = "name") -> str:
    """A node's or pod's name: a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253)."""
    name = text(value, what=f"a {what}").strip()
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(f"{_shown(value)} is not a {what} (lowercase letters, digits, '-' and '.', at most 253)")
    return name


def context_names(value: Any) -> tuple[str, ...]:
    """'a' or 'a,b' (a fleet): each name non-empty, without control characters, none twice."""
    names = tuple(part.strip() for part in text(value, what="a context name").split(","))
    if not names or any(not n for n in names):
        raise ValueError(f"{_shown(value)} has an empty context name")
    if len(set(names)) != len(names):
        raise ValueError(f"{_shown(value)} names a context twice")
    return names


def prom_label(value: Any) -> str:
    """A Prometheus label name (it is written into queries)."""
    name = text(value, what="a label name").strip()
    if not _PROM_LABEL.fullmatch(name):
        raise ValueError(f"{_shown(value)} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")
    return name


def prometheus_url(value: Any) -> str:
    """An http(s) URL with a host and, if any, a port 1..65535, that urllib.parse reads without raising."""
    url = text(value, what="a URL").strip()
    if any(c.isspace() for c in url):
        raise ValueError(f"{_shown(value)} holds spaces")
    try:
        parts = urlsplit(url)
        port, host = parts.port, parts.hostname
    except ValueError as exc:
        raise ValueError(f"{_shown(value)} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{_shown(value)} is not an http:// or https:// URL")
    if not host:
        raise ValueError(f"{_shown(value)} has no host")
    if port == 0:
        raise ValueError(f"{_shown(value)} has port 0")
    if parts.netloc.rpartition("@")[2].startswith("["):
        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            raise ValueError(f"{_shown(value)} has a bad IPv6 address") from None
    elif len(host) > 253 or not _HOST_NAME.fullmatch(host):
        raise ValueError(f"{_shown(value)} has a bad host name")
    return url


def header(name: Any, value: Any) -> tuple[str, str]:
    """An HTTP header sent to the metrics store: a token for its name, no line break or control in its value."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"{_shown(name)} is not an HTTP header name")
    if not isinstance(value, str) or _has_control(value.replace("\t", " ")):
        raise ValueError(f"{name}: the value must be text on one line")
    return name, value
