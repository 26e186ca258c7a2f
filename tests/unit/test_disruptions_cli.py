"""`gputui disruptions [-o json|table]` (issue 40 items 1 and 6) against the demo: every actor the demo puts a
node in the hands of, with its phase, since and why, stuck first; said to be simulated; text from the cluster
never reaches the terminal raw."""

from __future__ import annotations

import json

import pytest

from gputui.backends.demo import simulation
from gputui.backends.demo.scenario import SimNode
from gputui.cli.main import main
from gputui.vocabulary import disruptions as d
from tests.support.gputui_cli import run

HOSTILE = "\x1b]0;pwned\x07\x1b[2J[bold]XID 48[/bold]"


def test_json_names_every_demo_actor_with_phase_since_and_why(tmp_path):
    out = run("disruptions", "--demo", "--seed", "7", "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert listed["simulated"] is True and listed["known"] is True
    # Every source named with its state (the demo serves every actor's kinds), none "not read yet".
    assert {k: listed["sources"][k] for k in ("RebootNode", "TerminateNode", "GPUReset")} == \
        dict.fromkeys(("RebootNode", "TerminateNode", "GPUReset"), "read")
    assert "other" not in listed["sources"] and "not read yet" not in json.dumps(listed["sources"])
    rows = listed["disruptions"]
    assert all(r["simulated"] is True for r in rows)
    got = {(r["node"], r["actor"]): r for r in rows}
    assert {actor for _, actor in got} == {d.NVSENTINEL, d.KARPENTER, d.CLUSTER_AUTOSCALER, d.GPU_OPERATOR,
                                           d.PERSON, d.MAINTENANCE_OPERATOR}
    assert got[("gpu-a100-03", d.NVSENTINEL)]["phase"] == "quarantined"
    assert got[("gpu-a100-03", d.NVSENTINEL)]["age_s"] == pytest.approx(3 * 3600, abs=120)
    assert "XID 48" in got[("gpu-a100-03", d.NVSENTINEL)]["why"]
    assert got[("gpu-l40s-04", d.CLUSTER_AUTOSCALER)]["phase"] == "deleting"
    assert got[("gpu-l40s-04", d.CLUSTER_AUTOSCALER)]["since"] is not None
    # Karpenter's taint carries no time, its NodeClaim's DisruptionReason does: when it chose the node (15 min before)
    assert got[("gpu-a100-07", d.KARPENTER)]["age_s"] == pytest.approx(15 * 60, abs=120)
    assert got[("gpu-a100-06", d.PERSON)]["phase"] == "cordoned"
    assert got[("gpu-a100-08", d.GPU_OPERATOR)]["stuck"]
    stuck = [bool(r["stuck"]) for r in rows]
    assert stuck == sorted(stuck, reverse=True) and stuck[0]  # stuck ones first
    assert all(r["why"] for r in rows)


def test_table_says_simulated_and_lists_the_stuck_in_full(tmp_path):
    out = run("disruptions", "--demo", "--seed", "7", home=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# SIMULATED")
    assert any(line.startswith("gpu-a100-08: gpu-operator upgrade-failed stuck: upgrade failed") for line in lines)
    said = " ".join(lines[next(i for i, line in enumerate(lines) if line.startswith("sources: ")):])
    assert said.startswith("sources: Node objects: read") and "RebootNode: read; TerminateNode: read; GPUReset: read" \
        in said and "not read yet" not in said


@pytest.fixture
def hostile_demo(monkeypatch):
    """The demo with NVSentinel's quarantine event carrying terminal escapes and markup."""
    real = simulation.hand_to_actors

    def hostile(nodes: dict[str, SimNode], start: float) -> None:
        real(nodes, start)
        nodes["gpu-a100-03"].annotations[d.NVSENTINEL_EVENT] = json.dumps(
            [{"checkName": "GpuXidError", "message": HOSTILE}])

    monkeypatch.setattr(simulation, "hand_to_actors", hostile)


@pytest.mark.parametrize("output", ["json", "table"])
def test_hostile_text_is_never_written_raw(hostile_demo, capsys, output):
    assert main(["disruptions", "--demo", "-o", output]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\x07" not in text
    if output == "json":  # escaped by JSON: the value itself comes back whole
        row = next(r for r in json.loads(text)["disruptions"] if r["actor"] == d.NVSENTINEL)
        assert HOSTILE in row["why"]
    else:
        assert "[bold]XID 48[/bold]" in text  # shown as written, never read as markup
