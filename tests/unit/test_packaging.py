"""The wheel holds every package: pyproject.toml lists gputui's packages by hand (themes and keymaps are
mapped from the repo's top), and an editable install finds a package left off that list while a wheel
does not, so a new room would import in every test and be missing from `pip install .`."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_the_source_tree_is_in_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "gputui").rglob("__init__.py")}
    assert on_disk - listed == set(), "packages missing from pyproject.toml's [tool.setuptools] packages"
    assert listed - on_disk == {"gputui.themes", "gputui.keymaps"}  # mapped from themes/ and keymaps/
