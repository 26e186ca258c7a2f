"""An access review that got no verdict is unknown, never a denial: the real apiserver behind a proxy that
answers every SelfSubjectAccessReview itself, with a 503 or with silence (tests/support/api_faults.py). Reads
work (they reach the apiserver); every write command refuses with the cause named, exit 2, no "your identity
may not…", and writes nothing (the apiserver's audit log); the terminal UI that `serve --allow-writes` runs says
the same on a write key. Before: a 503 read as "your identity may not patch routes" (kube_writer.allowed's
`except BackendError: return False`), and a review that timed out failed every command, reads too, as "could
not be reached" (the server answered them). A cluster whose discovery failed said "may not patch routes" too.

A server that answers nothing at all is tests/unit/test_unreachable_every_command.py."""

from __future__ import annotations

from functools import partial

import pytest

from gputui.ops.traffic.vocabulary import ROLLOUT_ACTIONS
from tests.support.api_faults import Answer, FaultProxy, at, kubeconfig
from tests.support.argo import ARGO_CRDS
from tests.support.crds import install_crd
from tests.support.gputui_cli import page_settings, run
from tests.support.terminal import until
from tests.support.topology import DEFAULT_GPU_NODES

NODE = DEFAULT_GPU_NODES[0].name
SERVICE = "t-review-faults/chat"  # no such service: every write command must stop at its permission first
WRITES: dict[str, tuple[str, ...]] = {
    "check --drill": ("check", "--drill", NODE, "--yes-i-mean-it"),
    "drain": ("drain", NODE),
    "shift": ("shift", SERVICE, "--to", "v2=50"), "shift --undo": ("shift", SERVICE, "--undo"),
    **{f"shift --rollout {verb}": ("shift", SERVICE, "--rollout", verb) for verb in ROLLOUT_ACTIONS},
    "rollout": ("rollout", SERVICE, "v2"),
    "scale-down": ("scale-down", SERVICE, "v1", "1"),
}
READS: dict[str, tuple[str, ...]] = {
    "nodes": ("nodes",), "versions": ("versions",), "pools": ("pools",), "services": ("services",),
    "check": ("check", "--only", "identity"),
}
REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
FAULTS = {  # the proxy's answer to every access review, and what gputui must name as the cause
    "503": (Answer(503, "etcdserver: request timed out"), "503: etcdserver: request timed out"),
    "silent": (Answer(hang=True), "could not be reached (timed out)"),
}
DENIAL = ("may not", "your identity", "read-only", "Traceback")


@pytest.fixture(scope="module")
def routes_served(cluster):
    """Route kinds served, so a shift has reviews to ask (HTTPRoute, and Argo's Rollout with its status)."""
    api = cluster.harness_client()
    for plural in ("httproutes", *ARGO_CRDS):
        install_crd(api, plural)


@pytest.fixture(params=list(FAULTS))
def faulty(request, cluster, fake_kubelet, routes_served, tmp_path):
    """(kubeconfig through the proxy as the admin, the cause gputui must name)."""
    answer, cause = FAULTS[request.param]
    with FaultProxy(cluster.api_url, cluster.ca_file, at("POST", REVIEWS, answer)) as proxy:
        yield kubeconfig(tmp_path / "proxied.yaml", proxy.url, cluster.token("admin")), cause


def app_writes(cluster, mark) -> list[tuple[str, str]]:
    """What the admin identity wrote since `mark` beyond asking who it is."""
    return [(e["verb"], (e.get("objectRef") or {}).get("resource", e.get("requestURI", "")))
            for e in cluster.write_requests("admin", since=mark)
            if (e.get("objectRef") or {}).get("resource") not in ("selfsubjectreviews", "selfsubjectaccessreviews")]


@pytest.mark.parametrize("name", list(WRITES))
def test_a_write_command_says_unknown_with_the_cause_and_writes_nothing(name, faulty, cluster, tmp_path):
    kc, cause = faulty
    mark = cluster.audit_mark()
    out = run(*WRITES[name], "--kubeconfig", str(kc), home=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and " is unknown (its access review failed: " in lines[0], out.stderr
    assert cause in lines[0], lines[0]
    assert not [w for w in DENIAL if w in out.stdout + out.stderr], out.stdout + out.stderr
    assert app_writes(cluster, mark) == []


@pytest.mark.parametrize("name", list(READS))
def test_a_read_command_reads_and_claims_no_denial(name, faulty, cluster, tmp_path):
    kc, _cause = faulty
    out = run(*READS[name], "--kubeconfig", str(kc), home=tmp_path)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    assert out.stderr == "" and "may not" not in out.stdout and "your identity" not in out.stdout, out.stdout


@pytest.mark.parametrize("name", ["shift", "shift --undo", "shift --rollout promote", "rollout"])
def test_when_discovery_fails_a_shift_says_the_route_kinds_are_unknown(name, cluster, fake_kubelet, routes_served,
                                                                       tmp_path):
    """Without discovery no route kind is known, so neither is the review a shift needs: not "may not patch routes"."""
    with FaultProxy(cluster.api_url, cluster.ca_file, at("GET", "/apis", Answer(503))) as proxy:
        kc = kubeconfig(tmp_path / "proxied.yaml", proxy.url, cluster.token("admin"))
        out = run(*WRITES[name], "--kubeconfig", str(kc), home=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "whether this identity may patch routes is unknown" in out.stderr, out.stderr
    assert "API discovery failed: 503" in out.stderr and not [w for w in DENIAL if w in out.stderr], out.stderr


async def test_the_tui_of_serve_allow_writes_says_unknown_on_a_write_key(faulty, cluster, tmp_path, monkeypatch):
    from gputui.backends.factory import pending_backend
    from gputui.cli import common
    from gputui.ops.audit import AuditLog
    from gputui.ui.app import GputuiApp

    kc, cause = faulty
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    settings = page_settings(str(kc))
    mark = cluster.audit_mark()
    app = GputuiApp(settings, pending_backend(settings), audit=AuditLog(tmp_path / "audit.jsonl", "u", "proxied"),
                    connect=partial(common.backend, settings))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.nodes)
            assert app.backend.writer is not None and not app.backend.may("cordon")
            for key, operation in (("c", "cordon"), ("r", "drain")):
                await pilot.press(key)
                expected = f"{operation} is unavailable: whether this identity may patch nodes"
                await until(pilot, lambda: any(str(n.message).startswith(expected) for n in app._notifications))  # noqa: B023 - called at once, in this iteration
            said = [str(n.message) for n in app._notifications]
            assert all(cause in s and not [w for w in DENIAL if w in s] for s in said), said
    finally:
        app.backend.close()
    assert app_writes(cluster, mark) == []
