"""Benchmarks' figures as JSON (benchmarks/figures.py) and their comparison (scripts/bench-compare.py)."""

import ast
import importlib.util
import json
import math
from pathlib import Path

import pytest

from benchmarks.figures import FORMAT, Figures

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "scripts" / "bench-compare.py")
assert _spec and _spec.loader
bench_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_compare)


def _run(tmp_path, name, figures, settings=None):
    f = Figures("startup", settings or {"runs": 9})
    for key, (value, unit, better) in figures.items():
        f.add(key, value, unit, better)
    path = tmp_path / f"{name}.json"
    f.write(str(path))
    return path


def test_written_figures_read_back_with_their_unit_and_direction(tmp_path):
    path = _run(tmp_path, "a", {"first frame": (412.5, "ms", "lower"), "cores": (2, "", ""),
                                "missing": (math.nan, "ms", "lower")})
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["benchmark"] == "startup" and data["settings"] == {"runs": 9}
    assert data["figures"]["first frame"] == {"value": 412.5, "unit": "ms", "better": "lower"}
    assert data["figures"]["missing"]["value"] is None  # NaN is not measured, never a number


def test_a_figure_recorded_twice_or_with_no_direction_is_refused():
    f = Figures("x")
    f.add("a", 1.0)
    with pytest.raises(ValueError, match="twice"):
        f.add("a", 2.0)
    with pytest.raises(ValueError, match="better"):
        f.add("b", 1.0, better="up")


def test_each_figure_says_which_way_it_moved(tmp_path, capsys):
    old = _run(tmp_path, "old", {"frame": (400, "ms", "lower"), "rate": (100, "/s", "higher"),
                                 "cpu": (10, "%", "lower"), "queries": (8, "", ""), "gone": (1, "", "lower")})
    new = _run(tmp_path, "new", {"frame": (300, "ms", "lower"), "rate": (80, "/s", "higher"),
                                 "cpu": (10.2, "%", "lower"), "queries": (9, "", ""), "fresh": (2, "", "lower")})
    assert bench_compare.main([str(old), str(new)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["frame"].endswith("better") and "-25.0%" in rows["frame"]
    assert rows["rate"].endswith("WORSE") and "-20.0%" in rows["rate"]  # higher was better: it fell
    assert rows["cpu"].endswith("within noise")  # 2% under the 5% default
    assert rows["gone"].endswith("only in old") and rows["fresh"].endswith("only in new")
    assert bench_compare.main([str(old), str(new), "--fail-on-worse"]) == 1
    assert bench_compare.main([str(old), str(new), "--fail-on-worse", "--noise", "25"]) == 0


def test_runs_with_different_settings_say_so(tmp_path, capsys):
    old = _run(tmp_path, "old", {"frame": (400, "ms", "lower")}, {"runs": 9})
    new = _run(tmp_path, "new", {"frame": (400, "ms", "lower")}, {"runs": 3})
    bench_compare.main([str(old), str(new)])
    assert "different settings: runs 9 → 3" in capsys.readouterr().out


@pytest.mark.parametrize("content", [None, "{not json", json.dumps({"figures": {}}), "\udcff"])
def test_a_file_it_cannot_read_is_one_line_and_exit_2(tmp_path, capsys, content):
    good = _run(tmp_path, "good", {"frame": (400, "ms", "lower")})
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_bytes(content.encode("utf-8", "surrogateescape"))
    assert bench_compare.main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench-compare: ") and err.count("\n") == 1 and "Traceback" not in err


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _main(path: Path) -> ast.FunctionDef | None:
    return next((n for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "main"),
                None)


# The benchmarks, not the libraries beside them (fault_watch, harness_traffic, figures: no main, nothing run).
RUNNABLE = [p for p in sorted((ROOT / "benchmarks").glob("*.py")) if _main(p) is not None]


def test_the_runnable_benchmarks_are_found():
    assert len(RUNNABLE) >= 16 and {"startup.py", "scale.py", "keys.py"} <= {p.name for p in RUNNABLE}


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
def test_every_runnable_benchmark_offers_json_and_writes_it(path):
    """A benchmark with a main() takes --json FILE and writes its figures there."""
    tree = ast.parse(path.read_text())
    main = _main(path)
    assert main is not None
    assert any(isinstance(c.func, ast.Name) and c.func.id == "json_option" for c in _calls(main)), \
        f"{path.name}: main() adds no --json (benchmarks.figures.json_option)"
    writes = [c for c in _calls(tree) if isinstance(c.func, ast.Attribute) and c.func.attr == "write"
              and [ast.unparse(a) for a in c.args] == ["args.json"]]
    assert writes, f"{path.name}: never writes its figures (.write(args.json))"
