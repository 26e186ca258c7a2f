"""The one sanitiser for text from outside (the cluster, Prometheus, kubeconfigs, config, theme and keymap
files, error bodies) on its way to a terminal, a screen, a notification or a JUnit file.

Text from outside is data. A node's kernel string, a pod's scheduling message or an admission webhook's
error body can carry terminal control sequences (kubectl's CVE-2021-25743: `\\x1b]0;title\\x07` retitles
the pane, `\\x1b[2J` clears it), Rich/Textual markup (`[/bold]` raises MarkupError where markup is parsed)
or 10 kB values. Every such string goes through `visible()` (terminal text) or `markup_safe()` (where
markup is parsed) before it is shown; JSON output keeps the raw value, escaped by JSON.
"""

from __future__ import annotations

import re

# How much of one value from outside is shown: enough for any real name, message or version string, and a
# 10 kB annotation cannot push a screen's layout or a terminal's scrollback around.
MAX_FIELD = 400

# C0 controls (but tab and newline, decided per call), DEL, C1 controls (0x9b is CSI in 8-bit terminals),
# the line and paragraph separators, and the bidirectional overrides and isolates that reorder what a
# terminal shows (the "Trojan Source" characters).
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# Every "[" escaped, whatever follows: Rich's own escape leaves "[$var]" and "[ x]", which Textual's markup
# parser reads as a variable and a tag. A backslash before a "[" or at the end (where our own markup may
# follow) would escape that bracket, and Textual's parser has no way to write a literal one there: it is
# shown as "∖", its look-alike.  # noqa: RUF003 - the look-alike named on purpose
_BACKSLASH_BEFORE_MARKUP = re.compile(r"\\(?=\\*(\[|$))")
# XML 1.0 allows tab, newline, carriage return, U+0020-U+D7FF, U+E000-U+FFFD and U+10000-U+10FFFF only;
# anything else makes a JUnit file that no parser reads. Written as what is left out: the negated class of
# those ranges compiles in 4 ms at every start, this one in 0.4 (the same set: every code point checked).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _picture(match: re.Match[str]) -> str:
    """A control character as something a person can see and no terminal acts on: C0 as its Unicode
    control picture (ESC as ␛, BEL as ␇), DEL as ␡, anything else as its code (`<U+009B>`)."""
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return f"<U+{code:04X}>"


def visible(text: object, limit: int | None = MAX_FIELD, *, newlines: bool = False) -> str:
    """`text` as plain terminal text: control characters made visible, cut to `limit` characters with the
    count of what was cut (None: no cut). Newlines are kept only where the caller prints several lines."""
    out = str(text)
    if limit is not None and len(out) > limit:
        out = f"{out[:limit]}…(+{len(out) - limit} chars)"
    pattern = _UNSAFE if newlines else _UNSAFE_ONE_LINE
    return pattern.sub(_picture, out) if pattern.search(out) else out


def markup_safe(text: object, limit: int | None = MAX_FIELD, *, newlines: bool = False) -> str:
    """`visible()` text with markup escaped, for a place that parses markup (a Textual label or
    notification, a Rich markup string): `[/bold]` is shown as it is and never raises MarkupError. Where
    a widget takes a Rich `Text` or `markup=False`, give it `visible()` text instead."""
    out = _BACKSLASH_BEFORE_MARKUP.sub("\u2216", visible(text, limit, newlines=newlines))
    return out.replace("[", "\\[")


def xml_safe(text: object) -> str:
    """`visible()` text with the characters XML 1.0 cannot carry removed, for JUnit."""
    return _XML_INVALID.sub("", visible(text, None, newlines=True))


def json_escaped(text: str) -> str:
    """JSON text with what a terminal acts on written as JSON escapes (`\\u009b`): json.dumps escapes C0
    itself, but with ensure_ascii=False leaves C1 controls and bidi overrides raw. The value stays the same."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def is_clean(text: str) -> bool:
    """True when `text` holds nothing a terminal would act on (newlines and tabs aside)."""
    return _UNSAFE.search(text) is None
