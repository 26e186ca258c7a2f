"""A drain's out-of-rotation record and its label writes, fast: the record read back (anything it cannot use names
nothing), written sorted (None removes it), and each write a JSON patch that tests the pod's UID and each label's
value before it removes or adds: a pod replaced or relabelled meanwhile is left alone."""

from __future__ import annotations

import json

import pytest

from gputui.backends.base import ConflictError
from gputui.ops.drain.out_of_rotation import (
    RECORD,
    OutOfRotation,
    _pointer,
    parse_record,
    put_back,
    record_text,
    recorded,
    take_out,
)
from gputui.vocabulary.model import Node

A = OutOfRotation("llm/chat-0", "uid-0", {"serving": "true", "app.kubernetes.io/name": "chat"}, 12.5)


class Writer:
    identity = "t"

    def __init__(self, uid: str | None = "uid-0", conflict: bool = False) -> None:
        self.uid, self.conflict = uid, conflict
        self.patches: list[tuple] = []
        self.asked: list[tuple[str, str]] = []

    def pod_uid(self, namespace: str, name: str) -> str | None:
        self.asked.append((namespace, name))
        return self.uid

    def patch_object(self, group, version, plural, namespace, name, patch, patch_type="merge", subresource=""):
        if self.conflict:
            raise ConflictError("replaced")
        self.patches.append((group, version, plural, namespace, name, patch, patch_type, subresource))
        return {}


def test_a_label_key_is_a_json_pointer_segment():
    assert _pointer("app.kubernetes.io/name") == "/metadata/labels/app.kubernetes.io~1name"
    assert _pointer("a~b") == "/metadata/labels/a~0b"
    assert _pointer("a~/b") == "/metadata/labels/a~0~1b"


def test_the_record_round_trips_sorted():
    text = record_text({A.key: A})
    assert json.loads(text) == {"llm/chat-0": {"uid": "uid-0", "labels": {"serving": "true",
                                                                          "app.kubernetes.io/name": "chat"},
                                               "since": 12.5}}
    assert text == json.dumps(json.loads(text), sort_keys=True)
    assert parse_record(text) == {A.key: A}


def test_an_empty_record_is_removed():
    assert record_text({}) is None


@pytest.mark.parametrize("raw", ["", "not json", "[1]", '"x"', "null"])
def test_a_record_it_cannot_read_names_nothing(raw):
    assert parse_record(raw) == {}


def test_entries_it_cannot_use_are_skipped_and_the_others_kept():
    raw = json.dumps({"no-slash": {"uid": "u", "labels": {"a": "b"}}, "ns/not-a-dict": 5,
                      "ns/no-labels": {"uid": "u"}, "ns/labels-a-list": {"uid": "u", "labels": ["a"]},
                      "ns/ok": {"uid": "u", "labels": {"a": 1}, "since": 3}})
    assert parse_record(raw) == {"ns/ok": OutOfRotation("ns/ok", "u", {"a": "1"}, 3.0)}


def test_a_since_that_is_no_number_is_zero_and_a_missing_uid_empty():
    raw = json.dumps({"ns/a": {"labels": {"a": "b"}, "since": "yesterday"}})
    assert parse_record(raw) == {"ns/a": OutOfRotation("ns/a", "", {"a": "b"}, 0.0)}


def test_a_node_without_a_record_has_nothing_out():
    node = Node(name="n", ready=True, unschedulable=True, gpu_product="H100", gpu_capacity=8, gpu_allocatable=8)
    assert recorded(node) == {}
    marked = Node(name="n", ready=True, unschedulable=True, gpu_product="H100", gpu_capacity=8, gpu_allocatable=8,
                  annotations={RECORD: record_text({A.key: A}) or ""})
    assert recorded(marked) == {A.key: A}


def test_taking_out_tests_the_uid_and_each_value_then_removes_each_label():
    writer = Writer()
    take_out(writer, A)
    ((group, version, plural, namespace, name, ops, patch_type, sub),) = writer.patches
    assert (group, version, plural, namespace, name, patch_type, sub) == ("", "v1", "pods", "llm", "chat-0", "json", "")
    assert ops == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-0"},
        {"op": "test", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "chat"},
        {"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1name"},
        {"op": "test", "path": "/metadata/labels/serving", "value": "true"},
        {"op": "remove", "path": "/metadata/labels/serving"}]


def test_putting_back_adds_each_label_to_the_same_pod_only():
    writer = Writer()
    assert put_back(writer, A) is True
    assert writer.asked == [("llm", "chat-0")]
    ((group, version, plural, namespace, name, ops, patch_type, _sub),) = writer.patches
    assert (group, version, plural, namespace, name, patch_type) == ("", "v1", "pods", "llm", "chat-0", "json")
    assert ops == [{"op": "test", "path": "/metadata/uid", "value": "uid-0"},
                   {"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "chat"},
                   {"op": "add", "path": "/metadata/labels/serving", "value": "true"}]


@pytest.mark.parametrize("uid", [None, "uid-new"])
def test_a_pod_gone_or_replaced_is_not_put_back(uid):
    writer = Writer(uid=uid)
    assert put_back(writer, A) is False
    assert writer.patches == []


def test_a_pod_replaced_between_the_read_and_the_patch_is_not_put_back():
    assert put_back(Writer(conflict=True), A) is False


def test_a_name_with_a_slash_splits_once():
    writer = Writer(uid="u")
    take_out(writer, OutOfRotation("ns/a/b", "u", {"x": "y"}, 0.0))
    assert writer.patches[0][3:5] == ("ns", "a/b")
