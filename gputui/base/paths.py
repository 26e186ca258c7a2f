"""Where gputui keeps its files, the XDG way."""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def config_dir() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config") / "gputui"


def state_dir() -> Path:
    return _xdg("XDG_STATE_HOME", ".local/state") / "gputui"


def cache_dir() -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache") / "gputui"


def shown(path: Path) -> str:
    """A path as a person reads it: under the home directory as `~/…` (shorter at 80 columns)."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)
