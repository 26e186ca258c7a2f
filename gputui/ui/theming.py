"""Themes: YAML files (bundled in themes/, the user's in the config dir) -> Textual Themes.

Each file is validated whole: unknown keys and bad colours are reported with
the file's name, and a bad file never replaces a good theme.
"""

from __future__ import annotations

from dataclasses import fields
from importlib import resources
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme  # noqa: F401 - BUILTIN_THEMES re-exported: the CLI checks names

from gputui.base.paths import config_dir
from gputui.base.yaml_file import FileProblem, load_mapping, name_problem, parse_each, unknown_keys, yaml_files
from gputui.present.cells import Palette

COLOR_KEYS = (
    "primary", "secondary", "accent", "warning", "error", "success",
    "foreground", "background", "surface", "panel", "boost",
)
ALLOWED_KEYS = {"name", "dark", "variables", *COLOR_KEYS}
PALETTE_VARS = tuple(f.name.replace("_", "-") for f in fields(Palette))


def bundled_theme_dir() -> Path:
    return Path(str(resources.files("gputui.themes")))


def user_theme_dir() -> Path:
    return config_dir() / "themes"


def theme_files() -> list[Path]:
    """Bundled first, so a user's file of the same name overrides it."""
    return yaml_files(bundled_theme_dir(), user_theme_dir())


def _color(value: Any) -> str:
    Color.parse(str(value))  # raises ColorParseError
    return str(value)


def parse_theme(path: Path) -> Theme:
    """One theme file -> Theme, or ValueError naming everything wrong with it."""
    data = load_mapping(path)
    errors = unknown_keys(data, ALLOWED_KEYS)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.append("name is missing")
    elif why := name_problem(name):
        errors.append(why)
    colors: dict[str, str] = {}
    for key in COLOR_KEYS:
        if key in data:
            try:
                colors[key] = _color(data[key])
            except ColorParseError:
                errors.append(f"{key}: bad colour {data[key]!r}")
    if "primary" not in data:
        errors.append("primary is missing")
    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        errors.append("variables must be a mapping")
        variables = {}
    clean_vars: dict[str, str] = {}
    for key, value in variables.items():
        if key not in PALETTE_VARS:
            errors.append(f"unknown variable {key}")
            continue
        try:
            clean_vars[f"gputui-{key}"] = _color(value)
        except ColorParseError:
            errors.append(f"variables.{key}: bad colour {value!r}")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        errors.append("dark must be true or false")
    if errors:
        raise ValueError("; ".join(errors))
    return Theme(name=str(name).strip(), dark=dark, variables=clean_vars, **colors)  # type: ignore[arg-type]
    # (colors holds only the colour fields, each a string: mypy cannot see that through **)


ThemesRead = tuple[dict[str, Theme], list[FileProblem]]  # the good themes by name, and each bad file


def load_themes() -> ThemesRead:
    return parse_each(theme_files(), parse_theme, lambda theme: theme.name)


def palette_defaults() -> dict[str, str]:
    """Defaults for gputui's variables, so Textual's built-in themes work too."""
    default = Palette()
    return {f"gputui-{f.name.replace('_', '-')}": getattr(default, f.name) for f in fields(Palette)}


def palette_from(variables: dict[str, str]) -> Palette:
    values = {}
    for f in fields(Palette):
        value = variables.get(f"gputui-{f.name.replace('_', '-')}")
        if value:
            values[f.name] = Color.parse(value).hex
    return Palette(**values)
