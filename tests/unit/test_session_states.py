"""What arrives at a pod while it keeps serving (Arrivals.held, Little's law) and the three states' texts."""

from __future__ import annotations

import pytest

from gputui.vocabulary.sessions import NO_SIGNAL, UNKNOWN, Arrivals, PodSessions, SessionState


def test_sessions_held_is_the_arrival_rate_times_the_time_each_is_held():
    assert Arrivals(rate_per_s=2.0, mean_s=30.0).held() == pytest.approx(60.0)
    assert Arrivals(rate_per_s=0.5, mean_s=4.0).held() == pytest.approx(2.0)


def test_without_a_mean_what_it_holds_is_unknown_not_zero():
    assert Arrivals(rate_per_s=3.0).held() is None
    assert Arrivals(rate_per_s=3.0, mean_s=None).held() is None


def test_a_mean_of_zero_holds_nothing():
    assert Arrivals(rate_per_s=3.0, mean_s=0.0).held() == 0.0


def test_the_three_states_as_every_output_writes_them():
    assert PodSessions(SessionState.KNOWN, 0).text == "0"
    assert PodSessions(SessionState.KNOWN, 12).text == "12"
    assert UNKNOWN.text == "unknown" and UNKNOWN.live is None
    assert NO_SIGNAL.text == "–" and NO_SIGNAL.live is None
