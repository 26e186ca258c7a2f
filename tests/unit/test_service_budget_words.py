"""The service screen says, per version, the PodDisruptionBudget over its pods, and warns when none does (issue
35: a pod with no PDB showed an empty budget, with no word of warning)."""

from __future__ import annotations

from rich.console import Console

from gputui.backends.demo import DemoCluster
from gputui.present.cells import Palette
from gputui.present.service_view import service_view
from tests.demo_clock import ManualClock


def shown(key: str) -> str:
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    console = Console(width=200, record=True)
    console.print(service_view(snap, snap.service(key), None, "", [], Palette()))
    return console.export_text()


def test_a_version_without_a_budget_is_warned_of_and_one_with_a_budget_says_its_numbers():
    bare = shown("llm/codellama-34b")  # the demo's service without a PDB (gputui check's services.pdb)
    assert ("disruption budget  v1: none: no PodDisruptionBudget covers its pods, so a drain or a driver upgrade "
            "may evict them all at once") in bare
    covered = shown("llm/qwen2-72b")
    line = next(x for x in covered.splitlines() if x.startswith("disruption budget  v3: "))
    assert "disruption allowed" in line or "disruptions allowed" in line
    assert " 1 disruptions" not in line  # said in the singular for one


def test_versions_under_one_budget_share_a_line_and_a_service_on_one_node_is_said():
    """The demo's mistral-7b: all 8 pods on gpu-a100-01, one PDB over both versions."""
    text = shown("llm/mistral-7b")
    assert "disruption budget  stable, canary: mistral-7b-pdb: 1 disruption allowed" in text
    assert "all 8 pods on gpu-a100-01: one drain or one node failure takes the whole service" in text
    assert "4 of 5 pods on gpu-a100-02: one drain or one node failure takes most of the service" in shown(
        "llm/codellama-34b")
