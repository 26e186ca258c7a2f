"""Keymaps: YAML files mapping binding ids to keys (bundled in keymaps/, the user's in the config dir).

The keys written in the code's BINDINGS are the default keymap; a keymap file
names only what it changes, and may extend another keymap. Each file is checked
whole: unknown action ids, malformed keys and keys that would clash with
another action on the same screen are reported with the file's name, and a bad
file never replaces the keymap in force.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from textual.keys import Keys, _character_to_key

from gputui.base.paths import config_dir
from gputui.base.yaml_file import FileProblem, load_mapping, name_problem, parse_each, unknown_keys, yaml_files
from gputui.ui.keys.keymap_table import APP, SCOPES

DEFAULT = "default"
MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
ALLOWED_KEYS = {"name", "description", "extends", "keys"}


@dataclass(frozen=True, slots=True)
class Keymap:
    name: str
    description: str
    extends: str | None
    keys: dict[str, str]  # binding id -> normalised, comma-separated keys
    path: str


def bundled_keymap_dir() -> Path:
    return Path(str(resources.files("gputui.keymaps")))


def user_keymap_dir() -> Path:
    return config_dir() / "keymaps"


def watched_dirs() -> list[Path]:
    """Where theme and keymap files live: watched for hot reload."""
    from gputui.ui.theming import bundled_theme_dir  # noqa: PLC0415 (theming loads Textual; keymaps are read without it)

    return [bundled_theme_dir(), bundled_keymap_dir(), config_dir()]


@lru_cache(maxsize=1)
def default_keys() -> dict[str, str]:
    """Every action id and its keys as the code binds them: the default keymap (from the generated table,
    so checking a keymap imports no screen)."""
    out: dict[str, list[str]] = {}
    for bindings in (APP, *SCOPES.values()):
        for bid, keys in bindings.items():
            if bid.startswith("("):
                continue  # a binding without an id: it holds its key, but no keymap can move it
            for key in keys.split(","):
                if key not in out.setdefault(bid, []):
                    out[bid].append(key)
    return {bid: ",".join(keys) for bid, keys in out.items()}


def _known_key(key: str) -> bool:
    *mods, base = key.split("+") if key not in ("+",) else ["+"]
    if not base or any(m not in MODIFIERS for m in mods):
        return False
    if len(base) == 1:
        return (base in string.printable and base not in string.whitespace) or base == " "
    return base in _KEY_NAMES


_KEY_NAMES = frozenset(
    {k.value for k in Keys} | {_character_to_key(c) for c in string.printable if c not in string.whitespace}
    | {"space", "tab", "enter", "escape", "backspace"}
)


def normalise(keys: str) -> str:
    """'?,ctrl+d' -> 'question_mark,ctrl+d' (Textual's names, the ones events carry)."""
    return ",".join(_character_to_key(k) if len(k) == 1 else k for k in (p.strip() for p in keys.split(",")))


def parse_keymap(path: Path) -> Keymap:
    """One keymap file -> Keymap, or ValueError naming everything wrong with it."""
    data = load_mapping(path)
    errors = unknown_keys(data, ALLOWED_KEYS)
    name = data.get("name", path.stem)
    if why := name_problem(name):
        errors.append(why)
        name = path.stem
    extends = data.get("extends")
    if extends is not None and name_problem(extends):
        errors.append("extends must be a keymap name")
        extends = None
    keys = data.get("keys") or {}
    if not isinstance(keys, dict):
        errors.append("keys must map action ids to keys")
        keys = {}
    known = default_keys()
    clean: dict[str, str] = {}
    for action, value in keys.items():
        action = str(action)
        if action not in known:
            errors.append(f"unknown action id {action!r}")
            continue
        if not isinstance(value, (str, list)) or not value:
            errors.append(f"{action}: give keys as 'a,ctrl+b' or a list")
            continue
        text = ",".join(map(str, value)) if isinstance(value, list) else value
        bad = [k for k in (p.strip() for p in text.split(",")) if not _known_key(k)]
        if bad:
            errors.append(f"{action}: unknown key {', '.join(map(repr, bad))}")
            continue
        clean[action] = normalise(text)
    if errors:
        raise ValueError("; ".join(errors))
    return Keymap(name.strip(), str(data.get("description") or ""), extends, clean, str(path))


def keymap_files(user_only: bool = False) -> list[Path]:
    """Bundled first, so a user's file of the same name replaces it."""
    if user_only:
        return yaml_files(user_keymap_dir())
    return yaml_files(bundled_keymap_dir(), user_keymap_dir())


def resolve(name: str, keymaps: dict[str, Keymap]) -> dict[str, str]:
    """The keys in force under a keymap that differ from the code's: its `extends` chain first.

    KeyError names a missing keymap; ValueError a loop.
    """
    chain: list[Keymap] = []
    current: str | None = name
    while current is not None and not (current == DEFAULT and DEFAULT not in keymaps):
        if any(k.name == current for k in chain):
            raise ValueError(f"extends loops back to {current!r}")
        chain.append(keymaps[current])
        current = chain[-1].extends
    merged: dict[str, str] = {}
    for keymap in reversed(chain):
        merged.update(keymap.keys)
    defaults = default_keys()
    return {bid: keys for bid, keys in merged.items() if set(keys.split(",")) != set(defaults[bid].split(","))}


def clashes(changes: dict[str, str]) -> list[str]:
    """Keys this keymap adds to an action that another action on the same screen already holds.

    Overlaps the code's defaults make on purpose (enter opens a node both as the
    table's select and as the screen's action) are not the keymap's doing.
    """
    defaults = default_keys()
    added = {bid: set(keys.split(",")) - set(defaults[bid].split(",")) for bid, keys in changes.items()}
    found: set[str] = set()
    for scope, own in SCOPES.items():
        taken: dict[str, set[str]] = {}
        for bid, keys in {**APP, **own}.items():  # the app's bindings are live on every screen
            if bid.startswith("("):  # bindings without an id still hold their keys
                for key in keys.split(","):
                    taken.setdefault(key, set()).add(bid)
                continue
            for key in (changes.get(bid) or defaults[bid]).split(","):
                taken.setdefault(key, set()).add(bid)
        for key, holders in taken.items():
            if len(holders) > 1 and any(key in added.get(h, ()) for h in holders):
                found.add(f"{key} is both {' and '.join(sorted(holders))} on the {scope} screen")
    return sorted(found)


def load_keymaps() -> tuple[dict[str, Keymap], list[FileProblem]]:
    keymaps, problems = parse_each(keymap_files(), parse_keymap, lambda keymap: keymap.name)
    broken: list[str] = []
    for name, keymap in keymaps.items():  # judge every keymap before dropping any
        try:
            found = clashes(resolve(name, keymaps))
        except KeyError as exc:
            found = [f"extends unknown keymap {exc.args[0]!r}"]
        except ValueError as exc:
            found = [str(exc)]
        if found:
            problems.append(FileProblem(keymap.path, "; ".join(found)))
            broken.append(name)
    for name in broken:
        del keymaps[name]
    return keymaps, problems
