"""Which waited-on pods a drain takes out of rotation (out_of_rotation.choose), fast, on hand-built snapshots:
capacity stays in rotation. A pod goes out only while every path that sends it traffic keeps another pod
serving (Ready, not deleting, not finished, not already out) and every PDB over it keeps its desired healthy
pods in rotation; the choices made so far count; a pod no label can take out stays in, with why. The mutants
named in each docstring are one-line bugs of gputui/ops/drain/out_of_rotation.py these tests kill."""

from __future__ import annotations

from dataclasses import replace

from gputui.ops.drain.out_of_rotation import KEPT_IN, OutOfRotation, choose
from gputui.policy.rotation import Rotation, RotationState, rotation_of
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import Budget, InferencePod, Node, PodSelector

LABELS = {"app": "llama", "serving": "true", "pod-template-hash": "abc"}
DEPLOY = PodSelector("Deployment", "ns", "llama", {"app": "llama"}, frozenset({"app"}))
SVC = PodSelector("Service", "ns", "llama", {"app": "llama", "serving": "true"})


def pod(name: str, **kw) -> InferencePod:
    base = dict(namespace="ns", name=name, uid=f"uid-{name}", node="n1", service="llama", version="v1",
                labels=LABELS, session_signal=True, gpu_request=1, owner_kind="ReplicaSet", ready=True)
    base.update(kw)
    return InferencePod(**base)


def snap(*pods: InferencePod, budgets: tuple[Budget, ...] = ()) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, "t", nodes=(Node("n1", ready=True, unschedulable=False, gpu_product="H100",
                                                 gpu_capacity=8, gpu_allocatable=8),),
                           pods=pods, selectors=(SVC, DEPLOY), budgets=budgets)


def chosen(s: ClusterSnapshot, names: list[str], now: float = 42.0, already_out=()) -> dict:
    by_name = {p.name: p for p in s.pods}
    return choose(s, [(by_name[n], rotation_of(by_name[n], s)) for n in names], now, already_out)


def test_a_pod_with_another_serving_goes_out_with_its_labels_uid_time_and_why():
    """Kills: the entry's labels, uid or `since` (now) changed or dropped, the note's label list or path names
    changed (`', '.join(labels)`), `p.key != pod.key` → `==` (the pod counted as its own replacement)."""
    s = snap(pod("a"), pod("b", node="n2"))
    entry, why = chosen(s, ["a"])["ns/a"]
    assert entry == OutOfRotation("ns/a", "uid-a", {"serving": "true"}, 42.0)
    assert why == "out of rotation (label serving removed from Service ns/llama's selection)"


def test_the_only_pod_serving_its_path_stays_in_and_says_which_path():
    """Kills: `if not in_rotation(...)` → `if in_rotation(...)`, the short note's wording, `break` → `continue`
    or `return`, `(None, ...)` → an entry (a pod taken out with nobody serving its Service)."""
    out = chosen(snap(pod("a")), ["a"])
    assert out == {"ns/a": (None, f"{KEPT_IN}, as Service ns/llama would have no pod serving; it goes out when "
                                  "another pod serves in its place")}


def test_the_choices_made_so_far_count_two_pods_of_one_path_leave_one_serving():
    """Kills: `out.get(p.key, (None, ""))[0] is None` → `is not None` (a pod already chosen counted as serving:
    both go out, nobody serves), the default `(None, "")` changed."""
    s = snap(pod("a"), pod("b"))
    out = chosen(s, ["a", "b"])
    assert out["ns/a"][0] is not None and out["ns/b"][0] is None
    assert "Service ns/llama would have no pod serving" in out["ns/b"][1]


def test_pods_that_do_not_serve_are_not_counted_as_serving():
    """A replacement that is not Ready, one being deleted, one finished, or one this process already took out
    (`already_out`) serves nobody. Kills each `and p.ready`, `not p.deleting`, `not p.terminated`, `p.key not in
    already_out` dropped or inverted in `serving`."""
    for other in (pod("b", ready=False), pod("b", deleting=True), pod("b", phase="Succeeded")):
        assert chosen(snap(pod("a"), other), ["a"])["ns/a"][0] is None, other
    s = snap(pod("a"), pod("b"))
    assert chosen(s, ["a"], already_out={"ns/b"})["ns/a"][0] is None
    assert chosen(s, ["a"], already_out={"ns/c"})["ns/a"][0] is not None


def _budget(desired: int) -> Budget:
    return Budget("ns", "llama", {"app": "llama"}, desired_healthy=desired, current_healthy=3,
                  disruptions_allowed=3 - desired)


def test_a_budget_keeps_its_desired_healthy_pods_in_rotation_at_the_boundary():
    """Two others serve: a PDB needing 2 lets it go (2 < 2 is false), one needing 3 keeps it in, with the
    budget's figures. Kills: `kept < b.desired_healthy` → `<=` or `>`, the budget's note's wording or figures."""
    pods = (pod("a"), pod("b", node="n2"), pod("c", node="n2"))
    assert chosen(snap(*pods, budgets=(_budget(2),)), ["a"])["ns/a"][0] is not None
    entry, why = chosen(snap(*pods, budgets=(_budget(3),)), ["a"])["ns/a"]
    assert entry is None
    assert why == (f"{KEPT_IN}, as PodDisruptionBudget llama needs 3 pods serving, 2 would be; it goes out when "
                   "another pod serves in its place")


def test_the_first_shortfall_is_the_one_said():
    """A path with nobody else serving and a budget short too: the path is said. Kills: `if not short and ...`
    → `if short and ...` / `or` (the budget's words overwrite the path's)."""
    entry, why = chosen(snap(pod("a"), budgets=(_budget(1),)), ["a"])["ns/a"]
    assert entry is None and "as Service ns/llama would have no pod serving;" in why


def test_a_budget_counts_only_its_own_pods_in_rotation_through_a_path():
    """The budget counts pods it selects that a path sends traffic to. Kills: `b.matches(p)` dropped (another
    app's pods counted for this budget), `any(path.selects...)` → `all`/dropped."""
    stranger = pod("z", labels={"app": "other", "serving": "true"})
    unrouted = pod("u", labels={"app": "llama"})  # the budget's, but no path selects it: out of rotation
    pods = (pod("a"), pod("b", node="n2"), stranger, unrouted)
    entry, why = chosen(snap(*pods, budgets=(_budget(2),)), ["a"])["ns/a"]
    assert entry is None and "PodDisruptionBudget llama needs 2 pods serving, 1 would be" in why


def test_a_pod_no_label_can_take_out_stays_in_with_the_rotations_words():
    """Kills: `is not RotationState.SWITCH` → `is` (a pod the label cannot take out written anyway), the note
    not the rotation's description, `continue` → `break` (the next pod not chosen)."""
    s = snap(pod("a"), pod("b", node="n2"))
    no_switch = Rotation(RotationState.NO_SWITCH, (SVC,), why="Service ns/llama selects it only on app")
    a, b = s.pods
    out = choose(s, [(a, no_switch), (b, rotation_of(b, s))], 1.0)
    assert out["ns/a"] == (None, no_switch.describe())
    assert out["ns/b"][0] is not None  # the next pod still chosen, and a still counts as serving


def test_the_neighbours_decide_what_counts_as_in_rotation_for_a_budget():
    """A PDB's count spans every path of the namespace (the rotation's neighbours), not only the pod's own.
    Kills: `rotation.neighbours or rotation.paths` → `rotation.paths` only (a pod another Service serves not
    counted) or → `and`."""
    v2 = PodSelector("Service", "ns", "llama-v2", {"app": "llama", "version": "v2"})
    s = replace(snap(pod("a"), pod("b", labels={"app": "llama", "version": "v2"}, node="n2"),
                     budgets=(_budget(1),)), selectors=(SVC, v2, DEPLOY))
    a = s.pods[0]
    rot = rotation_of(a, s)
    assert rot.state is RotationState.SWITCH and v2 in rot.neighbours
    # Its own path has nobody else: kept for the path. The budget alone would let it go (b serves via v2).
    only_budget = replace(rot, paths=(), neighbours=(SVC, v2))
    assert choose(s, [(a, only_budget)], 0.0)["ns/a"][0] is not None
    assert choose(s, [(a, replace(rot, paths=(SVC,), neighbours=()))], 0.0)["ns/a"][0] is None


def test_a_pod_taken_out_by_two_labels_names_both_in_its_note():
    """A pod whose paths no one label serves loses two: the note lists them, comma-separated, as the record
    and the board say them. Kills `', '.join(labels)` → `'XX, XX'.join(labels)` (invisible with one label)."""
    two = {**LABELS, "tier": "gold"}
    s = snap(pod("a", labels=two), pod("b", node="n2", labels=two))
    switch = Rotation(RotationState.SWITCH, (SVC,), ("serving", "tier"))
    entry, why = choose(s, [(s.pods[0], switch)], 42.0)["ns/a"]
    assert entry is not None and entry.labels == {"serving": "true", "tier": "gold"}
    assert why == "out of rotation (label serving, tier removed from Service ns/llama's selection)"
