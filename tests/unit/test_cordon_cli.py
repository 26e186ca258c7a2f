"""`gputui cordon NODE --reason …` and `gputui uncordon NODE [--override-owner]` on the demo cluster, as a user runs
them (issue 40 item 2): the record written with the cordon, the uncordon of a node another actor holds refused
in one line naming it (exit 1) unless --override-owner, which the audit log names; bad input, read-only and
protected contexts refused with exit 2, writing nothing."""

from __future__ import annotations

import json

import pytest

from tests.support.gputui_cli import run

UPGRADING = "gpu-l40s-03"  # the demo's node mid driver upgrade (pod-restart-required), cordoned by the GPU Operator


def audit(home) -> list[dict]:
    path = home / ".state" / "gputui" / "audit-demo.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def one_error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: error: ") and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def test_cordon_writes_the_record_with_the_cordon_and_audits_it(tmp_path):
    out = run("cordon", "gpu-h100-01", "--demo", "--reason", "bad fan on GPU 3", "--ticket", "OPS-12",
              "--expires", "4h", "-o", "json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["result"] == "node/gpu-h100-01 cordoned" and got["simulated"] is True
    assert got["record"]["reason"] == "bad fan on GPU 3" and got["record"]["ticket"] == "OPS-12"
    [_intent, result] = audit(tmp_path)
    assert (result["action"], result["target"], result["result"]) == ("cordon", "node/gpu-h100-01", "ok")
    record = result["params"]["record"]
    assert record["by"] == "demo-operator" and record["reason"] == "bad fan on GPU 3"
    assert record["expires"] - record["since"] == pytest.approx(4 * 3600, abs=2)


def test_uncordon_of_a_node_another_actor_holds_is_refused_naming_it_and_sends_nothing(tmp_path):
    out = run("uncordon", UPGRADING, "--demo", home=tmp_path)
    assert out.returncode == 1
    line = one_error_line(out)
    assert f"{UPGRADING} is held by another actor: the GPU Operator is upgrading its driver" in line
    assert "--override-owner" in line
    assert "Held by another actor" in out.stdout
    assert audit(tmp_path) == []
    dry = run("uncordon", UPGRADING, "--demo", "--dry-run", "-o", "json", home=tmp_path)
    assert dry.returncode == 1 and json.loads(dry.stdout)["owner"]["holders"][0]["actor"] == "gpu-operator"


def test_override_owner_uncordons_and_the_audit_names_the_overridden_owner(tmp_path):
    out = run("uncordon", UPGRADING, "--demo", "--override-owner", home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"node/{UPGRADING} uncordoned (overriding: the GPU Operator is upgrading its driver" in out.stdout
    result = audit(tmp_path)[-1]
    assert (result["action"], result["result"]) == ("uncordon", "ok")
    [owner] = result["params"]["override_owner"]
    assert (owner["actor"], owner["phase"]) == ("gpu-operator", "pod-restart-required")


def test_a_plain_cordon_is_said_but_not_refused(tmp_path):
    out = run("uncordon", "gpu-a100-08", "--demo", "--dry-run", home=tmp_path)  # upgrade failed: left to a person
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("args, fragment", [
    (["cordon", "gpu-h100-01"], "the following arguments are required: --reason"),
    (["cordon", "gpu-h100-01", "--reason", ""], "a reason is required"),
    (["cordon", "gpu-h100-01", "--reason", "x" * 201], "at most 200"),
    (["cordon", "gpu-h100-01", "--reason", "a\x1b[2Jb"], "control character"),
    (["cordon", "gpu-h100-01", "--reason", "password=hunter2"], "credential"),
    (["cordon", "gpu-h100-01", "--reason", "x", "--expires", "soon"], "neither a duration"),
    (["cordon", "gpu-h100-01", "--reason", "x", "--expires", "2001-01-01"], "in the past"),
    (["cordon", "no-such-node", "--reason", "x"], 'node "no-such-node" not found'),
    (["cordon", "gpu-h100-01", "--reason", "x", "--read-only"], "read-only: cordon is unavailable"),
    (["uncordon", UPGRADING, "--override-owner", "--read-only"], "read-only: uncordon is unavailable"),
])
def test_bad_input_and_read_only_are_one_line_exit_2_and_write_nothing(tmp_path, args, fragment):
    out = run(*args, "--demo", home=tmp_path)
    assert out.returncode == 2, out.stderr
    assert fragment in one_error_line(out)
    assert audit(tmp_path) == []


def test_a_protected_context_refuses_both(tmp_path):
    config = tmp_path / ".config" / "gputui"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text("protected_contexts: [demo]\n")
    for args in (("cordon", "gpu-h100-01", "--reason", "x"), ("uncordon", UPGRADING, "--override-owner")):
        out = run(*args, "--demo", home=tmp_path)
        assert out.returncode == 2 and "is protected" in one_error_line(out)
    assert audit(tmp_path) == []
