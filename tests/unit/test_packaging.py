"""A plain, non-editable install must carry the bundled themes and keymaps."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_themes_keymaps_and_stylesheet(tmp_path):
    # Built from a clean copy, as on a fresh machine: an egg-info left by an editable install lists every
    # file and would hide a package missing from pyproject's list.
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__",
                                                                  "__snapshots__", ".pytest_cache", ".hypothesis"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True, capture_output=True, timeout=300,
    )
    wheel = next(tmp_path.glob("gputui-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    bundled = {p.name for p in (ROOT / "themes").glob("*.yaml")}
    assert bundled and {f"gputui/themes/{n}" for n in bundled} <= names
    assert "gputui/ui/gputui.tcss" in names
    assert any(n.startswith("gputui-") and n.endswith("entry_points.txt") for n in names)
    # Every module of the source tree is in the wheel (a package missing from pyproject's list would
    # install a gputui that fails at its first import of it).
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "gputui").rglob("*.py")}
    assert sources and sources <= names, sorted(sources - names)
