"""The weights a shift writes, at their edges: apportioning to an exact total, shares of unknown weights,
rebalancing, what a target may say, and the route's own scale."""

from __future__ import annotations

import math

import pytest

from gputui.ops.traffic.vocabulary import Step
from gputui.ops.traffic.weights import _parse_pct, apportion, rebalance, resolve_targets, route_scale, shares


def test_nothing_to_apportion_is_all_zero():
    assert apportion({"a": 0.0, "b": 0.0}, 100) == {"a": 0, "b": 0}
    assert apportion({}, 100) == {}


def test_an_exact_share_is_not_rounded_down_by_float_error():
    assert apportion({"a": 70.0, "b": 30.0}, 100) == {"a": 70, "b": 30}
    assert apportion({"a": 57.99999999999, "b": 42.00000000001}, 100) == {"a": 58, "b": 42}
    assert apportion({"a": 29.0, "b": 71.0}, 1000) == {"a": 290, "b": 710}


def test_the_largest_remainder_gets_the_unit_not_the_first():
    assert apportion({"a": 10.2, "b": 10.9, "c": 78.9}, 100) == {"a": 10, "b": 11, "c": 79}
    assert apportion({"a": 1.0, "b": 2.0}, 100) == {"a": 33, "b": 67}  # relative, not percent of 100


def test_shares_are_percent_of_the_known_weights():
    assert shares({"a": 1, "b": 3}) == {"a": 25.0, "b": 75.0}
    assert shares({"a": 2, "b": None}) == {"a": 100.0, "b": 0.0}  # unknown counts as nothing taken


def test_shares_of_all_unknown_weights_are_even_and_of_none_empty():
    assert shares({"a": None, "b": None, "c": None, "d": None}) == {"a": 25.0, "b": 25.0, "c": 25.0, "d": 25.0}
    assert shares({}) == {}


def test_shares_of_weights_all_zero_are_zero():
    assert shares({"a": 0, "b": 0}) == {"a": 0.0, "b": 0.0}


def test_rebalance_clamps_and_keeps_the_others_proportions():
    assert rebalance({"a": 60.0, "b": 20.0, "c": 20.0}, "a", 80.0) == pytest.approx({"a": 80.0, "b": 10.0, "c": 10.0})
    assert rebalance({"a": 50.0, "b": 50.0}, "a", 150.0) == {"a": 100.0, "b": 0.0}
    assert rebalance({"a": 50.0, "b": 50.0}, "a", -20.0) == {"a": 0.0, "b": 100.0}
    assert rebalance({"a": 100.0, "b": 0.0, "c": 0.0}, "a", 40.0) == {"a": 40.0, "b": 30.0, "c": 30.0}
    assert rebalance({"a": 60.0, "b": 40.0}, "a", "70") == pytest.approx({"a": 70.0, "b": 30.0})  # type: ignore[arg-type]


@pytest.mark.parametrize("text, value", [("25", 25.0), (" 25 % ", 25.0), ("12.5%", 12.5), (7, 7.0), (0, 0.0)])
def test_a_percentage_is_a_number_with_or_without_its_sign(text, value):
    assert _parse_pct(text) == value


@pytest.mark.parametrize("bad", [True, False, "nan", "inf", "-inf", float("nan"), math.inf, "x%", ""])
def test_no_number_is_no_percentage(bad):
    with pytest.raises(ValueError):
        _parse_pct(bad)


def test_targets_name_every_problem_at_once():
    pcts, errors = resolve_targets({"v1": 90.0, "v2": 10.0}, {"v3": 20, "v1": "x", "v2": 150})
    assert pcts == {"v1": 90.0, "v2": 10.0}
    assert errors == ['no version "v3" (versions: v1, v2)', "v1: 'x' is not a percentage", "v2: 150% is outside 0..100%"]


def test_a_target_of_none_or_a_bool_is_not_a_percentage():
    assert resolve_targets({"v1": 90.0, "v2": 10.0}, {"v2": None})[1] == ["v2: None is not a percentage"]  # type: ignore[dict-item]
    assert resolve_targets({"v1": 90.0, "v2": 10.0}, {"v2": True})[1] == ["v2: True is not a percentage"]


def test_no_target_is_an_error():
    assert resolve_targets({"v1": 90.0, "v2": 10.0}, {}) == ({"v1": 90.0, "v2": 10.0}, ["no target given"])


def test_targets_at_the_edges():
    assert resolve_targets({"v1": 90.0, "v2": 10.0}, {"v2": 0})[0] == {"v1": 100.0, "v2": 0.0}
    assert resolve_targets({"v1": 90.0, "v2": 10.0}, {"v2": 100})[0] == {"v1": 0.0, "v2": 100.0}
    assert resolve_targets({"v1": 50.0, "v2": 50.0}, {"v1": 60.005, "v2": 39.995})[1] == []  # within 0.01
    assert resolve_targets({"v1": 50.0, "v2": 50.0}, {"v1": 60.02, "v2": 40})[1] == ["targets add up to 100%, not 100%"]
    total = {"a": 50.0, "b": 30.0, "c": 20.0}
    assert resolve_targets(total, {"a": 50, "b": 50.005})[1] == []  # at most 100 (within 0.01): the rest gets 0
    assert resolve_targets(total, {"a": 50, "b": 50.005})[0]["c"] == 0.0
    assert resolve_targets(total, {"a": 50, "b": 50.02})[1] == ["targets add up to 100%, more than 100%"]


def test_the_rest_is_shared_by_the_others_in_their_proportions_or_evenly():
    assert resolve_targets({"a": 60.0, "b": 30.0, "c": 10.0}, {"c": 40})[0] == pytest.approx({"a": 40.0, "b": 20.0, "c": 40.0})
    assert resolve_targets({"a": 0.0, "b": 0.0, "c": 100.0}, {"c": 40})[0] == {"a": 30.0, "b": 30.0, "c": 40.0}


def test_a_step_moves_one_version_from_where_it_is():
    assert resolve_targets({"v1": 70.0, "v2": 30.0}, Step("v2", 15))[0] == pytest.approx({"v1": 55.0, "v2": 45.0})
    assert resolve_targets({"v1": 70.0, "v2": 30.0}, Step("v9", 15)) == (
        {"v1": 70.0, "v2": 30.0}, ['no version "v9" (versions: v1, v2)'])


@pytest.mark.parametrize("total, scale", [(99, 100), (100, 100), (200, 200), (250, 100), (1_000_000, 1_000_000),
                                          (1_000_100, 100), (999_900, 999_900)])
def test_the_routes_own_scale_only_when_a_multiple_of_100_within_the_maximum(total, scale):
    assert route_scale(total) == scale


def test_shares_that_add_up_to_less_than_one_are_still_apportioned():
    """Any positive total is apportioned (kills `total <= 0` made `<= 1`)."""
    assert apportion({"a": 0.25, "b": 0.75}, 100) == {"a": 25, "b": 75}


def test_the_others_keep_their_proportions_however_small_their_rest():
    """Proportions, not an even split, as long as the others hold anything (kills `rest > 0` and `base > 0` made
    `> 1`)."""
    assert rebalance({"a": 99.0, "b": 0.75, "c": 0.25}, "a", 50.0) == pytest.approx({"a": 50.0, "b": 37.5, "c": 12.5})
    pcts, errors = resolve_targets({"a": 99.0, "b": 0.75, "c": 0.25}, {"a": 50})
    assert errors == [] and pcts == pytest.approx({"a": 50.0, "b": 37.5, "c": 12.5})


def test_only_the_percent_sign_is_taken_off_a_target():
    with pytest.raises(ValueError):
        _parse_pct("25X")


def test_a_target_just_over_100_is_outside():
    assert resolve_targets({"v1": 90.0, "v2": 10.0}, {"v2": 100.5})[1] == ["v2: 100.5% is outside 0..100%"]


def test_every_target_outside_the_range_is_named_not_only_the_first():
    _, errors = resolve_targets({"a": 50.0, "b": 30.0, "c": 20.0}, {"a": 150, "b": -1, "c": "x"})
    assert errors == ["a: 150% is outside 0..100%", "b: -1% is outside 0..100%", "c: 'x' is not a percentage"]


def test_targets_at_exactly_100_and_a_hundredth_are_still_taken():
    """The tolerance is inclusive: 100 + 0.01 passes (kills `>` made `>=`)."""
    pcts, errors = resolve_targets({"a": 50.0, "b": 30.0, "c": 20.0}, {"a": 100.0, "b": 0.01})
    assert errors == [] and pcts["c"] == 0.0
