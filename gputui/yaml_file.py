"""Reading the user's YAML files (config, themes, keymaps) with one-line, line-numbered errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def load_mapping(path: Path, empty_ok: bool = False) -> dict[str, Any]:
    """The file's top-level mapping, or ValueError saying what is wrong and on which line."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
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
