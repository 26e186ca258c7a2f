"""Reading the user's YAML files (config, themes, keymaps) with one-line, line-numbered errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

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
        except ValueError as exc:
            problems.append(FileProblem(str(path), str(exc)))
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
    return ["unknown keys " + ", ".join(unknown)] if unknown else []


def load_mapping(path: Path, empty_ok: bool = False) -> dict[str, Any]:
    """The file's top-level mapping, or ValueError saying what is wrong and on which line."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid"
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"{where}not valid YAML ({problem})") from None
    if data is None and empty_ok:
        return {}
    if not isinstance(data, dict):
        raise ValueError("expected a mapping of keys to values")
    return data
