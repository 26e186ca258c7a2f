"""Reading the user's YAML files (config, themes, keymaps) with one-line, line-numbered errors."""

from __future__ import annotations

import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gputui.base.errors import first_line
from gputui.base.safe_text import visible

T = TypeVar("T")
# libyaml's loader when PyYAML has it: ten times faster, and every theme is read at start.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class FileProblem:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def yaml_files(*folders: Path) -> list[Path]:
    """The YAML files of each folder in turn (so a later folder's file of the same name wins)."""
    out: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            out += sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    return out


def parse_each(paths: list[Path], parse: Callable[[Path], T], name: Callable[[T], str]) -> tuple[dict[str, T], list[FileProblem]]:
    """Each file parsed on its own: the good ones by name, and why each bad one is bad."""
    good: dict[str, T] = {}
    problems: list[FileProblem] = []
    for path in paths:
        try:
            item = parse(path)
        except ValueError as exc:  # one line, whatever a key or value in the file held (a newline, an escape)
            problems.append(FileProblem(str(path), visible(str(exc), None)))
            continue
        good[name(item)] = item
    return good, problems


# A theme's or keymap's name is typed (`:theme NAME`, `--keymap NAME`), shown in pickers and lists, and used
# as a widget id: letters, digits, '.', '_' and '-' only, so a name can hold no markup or control sequence.
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def name_problem(name: object) -> str | None:
    """Why `name` cannot name a theme or keymap, or None when it can."""
    if not isinstance(name, str) or not NAME_RULE.fullmatch(name.strip()):
        return "name must be 1-64 letters, digits, '.', '_' or '-'"
    return None


def unknown_keys(data: dict[str, Any], allowed: set[str]) -> list[str]:
    """The problem line for keys a file may not have (typos, mostly), or nothing."""
    unknown = sorted(set(map(str, data)) - allowed)
    # A plain key as it is (`unknown keys colour`); any other quoted, so that a key holding a line break or a
    # control character cannot make the problem more than one line (found by tests/unit/test_fuzz_loaders.py).
    shown = [k if k.isprintable() and k.strip() == k and k else repr(k) for k in unknown]
    return ["unknown keys " + ", ".join(shown)] if unknown else []


# Bounds on what one file may make gputui do. A config, theme or keymap is a few kilobytes and a few hundred
# nodes; without bounds a 400-byte file of nested aliases ("billion laughs") expands to 10^9 nodes wherever
# its values are walked or printed (13.7 s and 2.4 GB on a theme), and deep nesting crashes libyaml's composer.
# Aliases stay allowed (a theme may reuse a colour: `accent: *primary`), but what they bring in is counted.
MAX_BYTES = 1024 * 1024
MAX_ALIAS_NODES = 5000  # nodes brought in by aliases, each counted with everything under it
MAX_DEPTH = 64


class _PastBounds(ValueError):
    """A document refused before it is built (its message says why, with the line)."""


def _check_events(text: str) -> None:
    """Refuse, before anything is built, a document nested past MAX_DEPTH, with an alias to a node still open
    (a recursive structure), or whose aliases bring in more than MAX_ALIAS_NODES nodes. One pass over
    libyaml's events: linear in the text, with no recursion."""
    sizes: dict[str, int] = {}  # anchor -> nodes in its node, aliases expanded
    open_nodes: list[list] = []  # [anchor, nodes so far] per collection being read
    brought = 0
    for event in yaml.parse(text, Loader=SAFE_LOADER):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(open_nodes) >= MAX_DEPTH:
                raise _PastBounds(f"line {event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
            open_nodes.append([event.anchor, 1])
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, n = open_nodes.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, n = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            if any(node[0] == event.anchor for node in open_nodes):
                raise _PastBounds(f"line {event.start_mark.line + 1}: alias *{event.anchor} refers to a node that "
                                 "contains it")
            anchor, n = None, sizes.get(event.anchor, 1)  # an undefined alias: the composer says so
            brought += n
            if brought > MAX_ALIAS_NODES:
                raise _PastBounds(f"line {event.start_mark.line + 1}: aliases expand to more than "
                                 f"{MAX_ALIAS_NODES} nodes")
        else:
            continue
        if anchor is not None:
            sizes[anchor] = n
        if open_nodes:
            open_nodes[-1][1] += n


def load_text(text: str) -> Any:
    """A YAML document's value (the safe loader: plain data only), or ValueError in one line: bad YAML, a value
    its tag cannot make (a date of month 13, a 5,000-digit integer), or past the bounds above."""
    try:
        _check_events(text)
        return yaml.load(text, Loader=SAFE_LOADER)
    except _PastBounds:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or first_line(str(exc), 200) or "invalid"
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"{where}not valid YAML ({first_line(str(problem), 200)})") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # from a constructor (dates, numbers)
        raise ValueError(f"not valid YAML ({first_line(str(exc), 200) or type(exc).__name__})") from None


def read_text(path: Path) -> str:
    """The file's text, at most MAX_BYTES of UTF-8, or ValueError saying why not."""
    try:
        if stat.S_ISFIFO(path.stat().st_mode) or stat.S_ISSOCK(path.stat().st_mode):
            raise ValueError("not a regular file")
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES // (1024 * 1024)} MB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def load_mapping(path: Path, empty_ok: bool = False) -> dict[str, Any]:
    """The file's top-level mapping, or ValueError saying what is wrong and on which line. The one reader of
    the user's YAML: config, themes and keymaps."""
    data = load_text(read_text(path))
    if data is None and empty_ok:
        return {}
    if not isinstance(data, dict):
        raise ValueError("expected a mapping of keys to values")
    return data
