"""The one sanitiser for text from outside: nothing a terminal acts on gets through, markup is data, values
are bounded, JUnit stays XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.content import Content

from gputui.base.safe_text import MAX_FIELD, is_clean, markup_safe, visible, xml_safe

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m[/bold] [red]x\r\n\u202etxt.exe\x00"


def test_escape_sequences_are_shown_not_acted_on():
    out = visible(HOSTILE)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out
    assert "␛]0;pwned␇" in out  # what was sent is still readable
    assert "\n" not in out  # one line unless the caller prints several
    assert "\n" in visible("a\nb", newlines=True)


def test_markup_is_shown_as_written_and_never_raises():
    for hostile in ("[/bold] x [red]y", "[$var] [ x] [@click=app.quit]q[/]"):
        for parse in (Text.from_markup, Content.from_markup):
            assert parse(f"node [b]{markup_safe(hostile)}[/b]").plain == f"node {hostile}"


def test_a_long_value_is_cut_and_says_how_much():
    out = visible("x" * 10_000)
    assert len(out) < MAX_FIELD + 30
    assert out.endswith("…(+9600 chars)")


def _as_xml(text: str) -> str:
    element = ET.Element("failure", message=text)
    element.text = text
    return ET.tostring(element, encoding="unicode")


def test_junit_text_is_valid_xml():
    ET.fromstring(_as_xml(xml_safe(HOSTILE + chr(0xFFFE))))


def test_what_junit_text_drops_is_exactly_what_xml_1_0_cannot_carry():
    """Every code point, against XML 1.0's Char production (§2.2) as the spec writes it. The pattern is written
    as its complement (it compiles 10× faster at start-up): one range off would drop a character or keep one
    no parser reads."""
    from gputui.base.safe_text import _XML_INVALID

    def xml_char(c: int) -> bool:
        return c in (0x9, 0xA, 0xD) or 0x20 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD or 0x10000 <= c <= 0x10FFFF

    wrong = [hex(c) for c in range(0x110000) if bool(_XML_INVALID.match(chr(c))) == xml_char(c)]
    assert wrong == []


@settings(max_examples=500)
@given(st.text())
def test_any_text_comes_out_clean_and_parses_as_markup(text):
    out = visible(text, None)
    assert is_clean(out) and "\n" not in out
    # The escaped form parses, in Rich and in Textual, whatever it holds, and shows the visible text (a
    # backslash before a bracket as its look-alike), inside markup of our own too.
    escaped = markup_safe(text, None)
    for parse in (Text.from_markup, Content.from_markup):
        shown = parse(f"[b]{escaped}[/b]").plain
        assert shown == out.replace("\\", "\u2216") or shown.replace("\u2216", "\\") == out


@settings(max_examples=300)
@given(st.text())
def test_any_text_makes_valid_junit(text):
    ET.fromstring(_as_xml(xml_safe(text)))


def test_headless_output_shows_escapes_and_keeps_json_valid_and_raw():
    import io
    import json

    from gputui.cli.safe_output import VisibleStream, _VisibleConsole

    text = io.StringIO()
    VisibleStream(text).write(f"node {HOSTILE}\n")
    assert is_clean(text.getvalue()) and text.getvalue().endswith("\n")
    as_json = io.StringIO()
    VisibleStream(as_json, json_mode=True).write(json.dumps({"kernel": HOSTILE}, ensure_ascii=False))
    assert is_clean(as_json.getvalue()) and json.loads(as_json.getvalue()) == {"kernel": HOSTILE}
    table = io.StringIO()
    console = _VisibleConsole(file=table, force_terminal=True, width=80)
    console.print(Text(f"kernel {HOSTILE}", style="bold red"))
    assert "\x1b[1;31m" in table.getvalue()  # its own colour codes stay
    assert "␛]0;pwned" in table.getvalue() and "\x1b]" not in table.getvalue() and "\x07" not in table.getvalue()
