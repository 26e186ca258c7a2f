"""The node filter's words (`/` on the dashboard): what each matches, in one place.

Words are ANDed. A state word matches that state exactly (`ready` is not NotReady); `alert` (or `problem`)
matches nodes with any alert; `drift` nodes whose driver differs from the fleet's; an alert kind (`xid`,
`temp`, `lost`…) nodes with that alert. Any other word is looked for in the node's name, GPU model and
driver version.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from itertools import compress, repeat
from operator import contains

from gputui.policy.health import Alert, has_driver_drift
from gputui.policy.problems import snapshot_alerts
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import Node, NodeState

STATE_WORDS = {state.value.lower(): state for state in NodeState}
PROBLEM_WORDS = {"alert", "alerts", "problem", "problems"}
DRIFT_WORDS = {"drift", "drifted"}
# The alert kinds problems.alerts_at gives (health.node_alerts' and an expired gputui cordon's): only these words
# need a node's alerts worked out.
ALERT_KINDS = {"notready", "lost", "xid", "fault", "health", "temp", "condition", "upgrade", "cordon"}


def words_of(text: str) -> list[str]:
    return text.lower().split()


def _special(word: str) -> bool:
    return word in STATE_WORDS or word in PROBLEM_WORDS or word in ALERT_KINDS or word in DRIFT_WORDS


def narrows(old: list[str], new: list[str]) -> bool:
    """Whether every node `new` matches also matched `old` (a character typed at the end of the filter): then
    only `old`'s matches need looking at. A word that became special (`read` → `ready`, a state) does not
    narrow: it matches differently."""
    # new may be longer (a word added): only old's words are compared
    return (len(old) <= len(new) and all(o in n for o, n in zip(old, new, strict=False))
            and not any(_special(w) for w in new))


def haystack(node: Node) -> str:
    """What a plain word is looked for in: the node's name, GPU model and driver version."""
    return f"{node.name} {node.gpu_product} {node.driver_version}".lower()


def node_matches(node: Node, words: list[str], alerts_of: Callable[[Node], list[Alert]], majority_driver: str,
                 text: str | None = None, flapping: Collection[str] = ()) -> bool:
    """Whether the node passes every word. `alerts_of`: its alerts (problems.alerts_at), worked out only for a
    word that needs them (every keystroke of the filter runs this over the whole fleet). `text`: its haystack
    when the caller keeps them (once per snapshot). `flapping`: nodes whose problem came and went within the
    minute (gputui.policy.problems): `alert` still finds them, as the header still counts them."""
    alerts: list[Alert] | None = None
    haystack_ = haystack(node) if text is None else text
    for word in words:
        if word in STATE_WORDS:
            ok = node.state is STATE_WORDS[word]
        elif word in PROBLEM_WORDS or word in ALERT_KINDS:
            alerts = alerts_of(node) if alerts is None else alerts
            ok = (bool(alerts) or node.name in flapping) if word in PROBLEM_WORDS else any(
                a.kind.lower() == word for a in alerts)
            ok = ok or word in haystack_
        elif word in DRIFT_WORDS:
            ok = has_driver_drift(node, majority_driver)
        else:
            ok = word in haystack_
        if not ok:
            return False
    return True


Matched = tuple[ClusterSnapshot, list[str], dict[str, Node]]  # a filter's snapshot, words and matches


def _haystacks(snap: ClusterSnapshot) -> dict[str, str]:
    return snap.derived("haystacks", lambda: {n.name: haystack(n) for n in snap.nodes})


def haystack_columns(snap: ClusterSnapshot) -> tuple[list[tuple[str, Node]], list[str]]:
    """(name, node) and its haystack, in the fleet's order, once per snapshot: what a first word typed is
    tested against. The poll thread works it out while a filter is in use (a first keystroke after each
    refresh would otherwise pay it: 60 ms at 65,000 nodes)."""
    texts = _haystacks(snap)
    return snap.derived("haystack-columns", lambda: ([(n.name, n) for n in snap.nodes],
                                                     [texts[n.name] for n in snap.nodes]))


def matching(snap: ClusterSnapshot, words: list[str], temp_threshold: float, majority_driver: str,
             last: Matched | None, flapping: Collection[str] = ()) -> Matched:
    """The nodes the words match (all without words). `last`: the previous keystroke's; a character typed at
    the end looks only among its matches (narrows). Haystacks are worked out once per snapshot."""
    if not words:
        return snap, words, snap.by_name()
    narrowing = last is not None and last[0] is snap and narrows(last[1], words)
    texts = _haystacks(snap)
    candidates = last[2].values() if narrowing and last is not None else snap.nodes
    if not any(_special(w) for w in words):  # plain words only: a substring test per word (most keystrokes)
        # (name, node) beside each haystack, in the fleet's order (once per snapshot), and the test run by C
        # loops (map, compress, dict): a first word typed looks at every node, and at 65,000 nodes a Python
        # loop over them was most of the keystroke.
        if narrowing and last is not None:
            named: Iterable[tuple[str, Node]] = last[2].items()
            haystacks: list[str] = list(map(texts.__getitem__, last[2]))
        else:
            named, haystacks = haystack_columns(snap)
        hits: Iterable[bool] = (map(contains, haystacks, repeat(words[0])) if len(words) == 1 else
                                (all(w in text for w in words) for text in haystacks))
        found = dict(compress(named, hits))
    else:
        found = {n.name: n for n in candidates if node_matches(n, words, lambda n: snapshot_alerts(snap, n, temp_threshold),
                                                               majority_driver, texts.get(n.name), flapping)}
    return snap, words, found
