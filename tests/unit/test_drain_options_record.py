"""A drain's options and the record it keeps on its node: written so that any gputui resumes the drain to the end
it was started for, and read back refusing (one clear line) whatever it cannot trust."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from gputui.ops.drain.options import (
    BY,
    DEADLINE,
    DEFAULT_SESSION_DEADLINE_S,
    IN_PROGRESS,
    OPTIONS,
    STARTED,
    DrainOptions,
    DrainRecordError,
    record_values,
    resumable,
    saved_drain,
    settings_options,
)
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION, Node

CHOSEN = DrainOptions(ignore_daemonsets=False, delete_emptydir_data=True, force=True,
                      pod_selector={"app": "llm", "tier": "gpu"}, grace_seconds=30, session_threshold=2,
                      session_deadline_s=120.0, disable_eviction=True, evict_unknown_at_deadline=True,
                      engine_shutdown_s=7.5, rotation_settle_s=45.0, gpu="3", gpu_pods=("llm/a", "llm/b"),
                      unattributed=("llm/c",), include_unattributed=True, gpu_device="gpu.nvidia.com/n1/gpus/gpu-3",
                      maintenance_namespace="nvidia-maintenance")


def node(annotations: dict[str, str], name: str = "gpu-1") -> Node:
    return Node(name=name, ready=True, unschedulable=True, gpu_product="H100", gpu_capacity=8, gpu_allocatable=8,
                annotations=annotations)


def test_the_defaults_are_the_safe_ones():
    """Nothing forced, nothing deleted, each pod's own grace period, unknown counts held at the deadline."""
    d = DrainOptions()
    assert (d.ignore_daemonsets, d.delete_emptydir_data, d.force, d.disable_eviction, d.evict_unknown_at_deadline) \
        == (True, False, False, False, False)
    assert d.grace_seconds is None and d.session_threshold == 0 and dict(d.pod_selector) == {}
    assert d.session_deadline_s == DEFAULT_SESSION_DEADLINE_S == 900.0 and d.engine_shutdown_s == 0.0


def test_every_option_survives_the_node_record():
    assert DrainOptions.from_json(CHOSEN.to_json()) == CHOSEN
    assert DrainOptions.from_json(DrainOptions().to_json()) == DrainOptions()


def test_the_record_is_plain_sorted_json_with_every_field():
    data = json.loads(CHOSEN.to_json())
    assert set(data) == {f.name for f in fields(DrainOptions)}  # every option, so a resume restores every one
    assert {k: data[k] for k in ("ignore_daemonsets", "delete_emptydir_data", "force", "pod_selector", "grace_seconds",
                                 "session_threshold", "session_deadline_s", "disable_eviction",
                                 "evict_unknown_at_deadline", "engine_shutdown_s")} == {
        "ignore_daemonsets": False, "delete_emptydir_data": True, "force": True,
        "pod_selector": {"app": "llm", "tier": "gpu"}, "grace_seconds": 30, "session_threshold": 2,
        "session_deadline_s": 120.0, "disable_eviction": True, "evict_unknown_at_deadline": True,
        "engine_shutdown_s": 7.5}
    assert CHOSEN.to_json() == json.dumps(data, sort_keys=True)


def test_a_selector_given_as_any_mapping_is_written_as_an_object():
    from types import MappingProxyType

    options = DrainOptions(pod_selector=MappingProxyType({"app": "llm"}))
    assert json.loads(options.to_json())["pod_selector"] == {"app": "llm"}


def test_fields_left_out_of_a_record_take_their_defaults():
    assert DrainOptions.from_json("{}") == DrainOptions()
    assert DrainOptions.from_json('{"force": true}') == DrainOptions(force=True)


def test_a_whole_number_deadline_is_read_as_seconds_in_a_float():
    assert DrainOptions.from_json('{"session_deadline_s": 60}').session_deadline_s == 60.0
    assert isinstance(DrainOptions.from_json('{"session_deadline_s": 60}').session_deadline_s, float)


def test_grace_period_null_means_each_pods_own_and_zero_is_kept():
    assert DrainOptions.from_json('{"grace_seconds": null}').grace_seconds is None
    assert DrainOptions.from_json('{"grace_seconds": 0}').grace_seconds == 0
    assert DrainOptions.from_json('{"session_threshold": 0}').session_threshold == 0
    assert DrainOptions.from_json('{"engine_shutdown_s": 0}').engine_shutdown_s == 0


@pytest.mark.parametrize("text, problem", [
    ("not json", "its options are not JSON"),
    ("[1, 2]", "its options are not a JSON object"),
    ('"force"', "its options are not a JSON object"),
    ('{"pod_selector": ["app"]}', "its option pod_selector is \"['app']\""),
    ('{"pod_selector": {"app": 1}}', "its option pod_selector is \"{'app': 1}\""),
    ('{"pod_selector": {"1": 1}}', "its option pod_selector"),
    ('{"grace_seconds": -1}', "its option grace_seconds is '-1'"),
    ('{"grace_seconds": true}', "its option grace_seconds is 'True'"),
    ('{"grace_seconds": 1.5}', "its option grace_seconds is '1.5'"),
    ('{"grace_seconds": "30"}', "its option grace_seconds is '30'"),
    ('{"force": "yes"}', "its option force is 'yes'"),
    ('{"force": 1}', "its option force is '1'"),
    ('{"disable_eviction": 0}', "its option disable_eviction is '0'"),
    ('{"session_threshold": -1}', "its option session_threshold is '-1'"),
    ('{"session_threshold": false}', "its option session_threshold is 'False'"),
    ('{"session_threshold": 2.5}', "its option session_threshold is '2.5'"),
    ('{"session_deadline_s": 0}', "its option session_deadline_s is '0'"),
    ('{"session_deadline_s": -5}', "its option session_deadline_s is '-5'"),
    ('{"session_deadline_s": true}', "its option session_deadline_s is 'True'"),
    ('{"session_deadline_s": "60"}', "its option session_deadline_s is '60'"),
    ('{"engine_shutdown_s": -0.5}', "its option engine_shutdown_s is '-0.5'"),
    ('{"engine_shutdown_s": false}', "its option engine_shutdown_s is 'False'"),
    ('{"engine_shutdown_s": "3"}', "its option engine_shutdown_s is '3'"),
    # One GPU's pods are "namespace/name" strings in a list; a resumed drain evicts exactly these.
    ('{"gpu_pods": "llm/a"}', "its option gpu_pods is 'llm/a'"),
    ('{"gpu_pods": {"llm/a": 1}}', "its option gpu_pods is \"{'llm/a': 1}\""),
    ('{"gpu_pods": ["llm-a"]}', "its option gpu_pods is \"['llm-a']\""),
    ('{"unattributed": ["llm/a", 5]}', "its option unattributed is \"['llm/a', 5]\""),
    ('{"maintenance_namespace": 5}', "its option maintenance_namespace is '5'"),
])
def test_a_record_it_cannot_trust_is_refused_naming_the_option(text, problem):
    with pytest.raises(DrainRecordError) as err:
        DrainOptions.from_json(text)
    assert str(err.value).startswith(problem)


def test_a_refused_value_is_quoted_at_most_forty_characters_long():
    with pytest.raises(DrainRecordError) as err:
        DrainOptions.from_json(json.dumps({"force": "x" * 100}))
    assert str(err.value) == f"its option force is {'x' * 40!r}"


def test_a_fractional_engine_shutdown_and_deadline_are_accepted():
    options = DrainOptions.from_json('{"engine_shutdown_s": 0.25, "session_deadline_s": 0.5}')
    assert (options.engine_shutdown_s, options.session_deadline_s) == (0.25, 0.5)


def test_the_record_a_drain_writes_when_it_starts():
    values = record_values(CHOSEN, "ops@example", started=86400.0 + 3661.0, deadline=99999.6)
    assert values == {BY: "ops@example", STARTED: "1970-01-02T01:01:01Z", DEADLINE: "100000",
                      OPTIONS: CHOSEN.to_json()}


def test_in_progress_phases_are_resumable_and_the_others_are_not():
    phases = {"a": "cordoned", "b": "waiting", "c": "evicting", "d": "paused", "e": "done", "f": "aborted",
              "g": "failed", "h": ""}
    snap = ClusterSnapshot(taken_at=0.0, context="t",
                           nodes=tuple(node({DRAIN_PHASE_ANNOTATION: p} if p else {}, n) for n, p in phases.items()))
    assert resumable(snap) == ["a", "b", "c", "d"]
    assert set(IN_PROGRESS) == {"cordoned", "waiting", "evicting", "paused"}


def test_a_saved_drain_resumes_with_its_options_and_deadline():
    options, deadline = saved_drain(node({OPTIONS: CHOSEN.to_json(), DEADLINE: "1700000000"}))
    assert options == CHOSEN and deadline == 1700000000.0


def test_a_saved_drain_without_a_deadline_has_none():
    assert saved_drain(node({OPTIONS: "{}"})) == (DrainOptions(), None)
    assert saved_drain(node({OPTIONS: "{}", DEADLINE: ""})) == (DrainOptions(), None)


def test_a_saved_drain_without_options_cannot_resume_and_says_where_they_should_be():
    for given in ({}, {OPTIONS: ""}):
        with pytest.raises(DrainRecordError) as err:
            saved_drain(node(given))
        assert str(err.value) == f"node gpu-1: its drain record has no options ({OPTIONS})"


def test_a_saved_drain_with_bad_options_names_the_node_and_the_option():
    with pytest.raises(DrainRecordError) as err:
        saved_drain(node({OPTIONS: '{"force": "yes"}'}))
    assert str(err.value) == "node gpu-1: cannot resume its drain: its option force is 'yes'"
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_a_saved_drain_with_a_bad_deadline_names_it():
    with pytest.raises(DrainRecordError) as err:
        saved_drain(node({OPTIONS: "{}", DEADLINE: "tomorrow" + "!" * 60}))
    assert str(err.value) == f"node gpu-1: cannot resume its drain: its deadline is {('tomorrow' + '!' * 60)[:40]!r}"
    assert err.value.__suppress_context__


@pytest.mark.parametrize("field", ["session_deadline_s", "engine_shutdown_s"])
@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_a_duration_no_clock_reaches_is_refused(field, value):
    """json reads NaN and Infinity as floats: a record holding one made a wait that never ends (Infinity passed
    `> 0`; options.py before this test). Refused like any value gputui cannot trust."""
    with pytest.raises(DrainRecordError, match=f"^its option {field} is "):
        DrainOptions.from_json(f'{{"{field}": {value}}}')


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "Infinity"])
def test_a_saved_deadline_no_clock_reaches_is_refused(text):
    """float() reads "nan" and "inf": a resumed pod compared `now >= nan`, never expired, and waited for ever
    (options.py before this test)."""
    with pytest.raises(DrainRecordError) as err:
        saved_drain(node({OPTIONS: "{}", DEADLINE: text}))
    assert str(err.value) == f"node gpu-1: cannot resume its drain: its deadline is {text!r}"


def test_a_rotation_settle_of_zero_is_a_choice_and_nan_or_infinity_are_refused():
    assert DrainOptions.from_json('{"rotation_settle_s": 0}').rotation_settle_s == 0
    for value in ("NaN", "Infinity", "-1"):
        with pytest.raises(DrainRecordError, match=r"^its option rotation_settle_s is "):
            DrainOptions.from_json(f'{{"rotation_settle_s": {value}}}')


@pytest.mark.parametrize("drain_via, via, namespace", [
    ("cordon", None, ""), ("nodemaintenance", None, "nvidia-maintenance"),
    ("cordon", "nodemaintenance", "nvidia-maintenance"),  # the flag over the setting, either way
    ("nodemaintenance", "cordon", ""),
])
def test_a_drains_options_start_from_the_settings_and_the_via_flag(drain_via, via, namespace):
    settings = Settings(session_deadline=120.0, engine_shutdown=7.5, drain_via=drain_via,
                        maintenance_namespace="nvidia-maintenance")
    assert settings_options(settings, via) == DrainOptions(session_deadline_s=120.0, engine_shutdown_s=7.5,
                                                           maintenance_namespace=namespace)
