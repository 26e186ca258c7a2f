"""An audit file as the tests read it: every line, and one entry per write (its result, or an event), with
the check that each result follows its own intent (one `id`) and no intent has two results."""

from __future__ import annotations

import json
from pathlib import Path


def raw_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def written(path: Path) -> list[dict]:
    """The results and events, in order; asserts every result was announced by its intent before it."""
    lines = raw_lines(path)
    intents: dict[str, dict] = {}
    closed: set[str] = set()
    out = []
    for line in lines:
        phase = line.get("phase")
        if phase == "intent":
            assert line["id"] not in intents, f"two intents with one id: {line}"
            assert "result" not in line
            intents[line["id"]] = line
            continue
        if phase == "result":
            intent = intents.get(line["id"])
            assert intent is not None, f"a result with no intent before it: {line}"
            assert line["id"] not in closed, f"two results for one intent: {line}"
            assert (intent["action"], intent["target"]) == (line["action"], line["target"])
            closed.add(line["id"])
        out.append(line)
    return out
