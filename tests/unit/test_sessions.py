"""A pod's sessions: what its labels and service say, and what one snapshot's counts say."""

import pytest

from gputui.vocabulary.sessions import GONE, SESSION_SIGNAL_LABEL, UNREADABLE, SessionState, read_sessions, signal_of

K, U, N = SessionState.KNOWN, SessionState.UNKNOWN, SessionState.NONE


@pytest.mark.parametrize("labels, service, expected", [
    ({}, "", (False, False)),
    ({}, "chat", (True, False)),
    ({SESSION_SIGNAL_LABEL: "true"}, "", (True, False)),
    ({SESSION_SIGNAL_LABEL: " False "}, "chat", (False, True)),  # a batch job grouped with a service
    ({SESSION_SIGNAL_LABEL: "maybe"}, "", (False, False)),  # not a word it knows: inferred as without it
])
def test_what_the_pod_says(labels, service, expected):
    assert signal_of(labels, service) == expected


@pytest.mark.parametrize("signal, opt_out, count, state, live", [
    (False, False, None, N, None),  # no signal, no series: not an inference pod
    (True, False, None, U, None),  # an inference pod nobody reads: unknown, never 0
    (False, False, GONE, U, None),  # a series named it and vanished: it had sessions
    (False, True, GONE, N, None),  # ... unless its label says it serves none
    (True, True, GONE, U, None),  # (the label and the service disagree: unknown)
    (False, False, 5, K, 5),
    (False, True, 3, K, 3),  # a count read is a count, whatever the label
    (True, False, 0, K, 0),  # zero read is zero
    (True, False, UNREADABLE, U, None),  # NaN in either gauge spoils the sum
    (False, True, UNREADABLE, U, None),  # ... whatever the label
])
def test_one_read(signal, opt_out, count, state, live):
    read = read_sessions(signal, opt_out, count)
    assert (read.state, read.live) == (state, live)
    assert read.text == {K: str(live), U: "unknown", N: "–"}[state]
