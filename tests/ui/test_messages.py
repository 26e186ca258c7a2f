"""The worker-to-UI messages are dataclasses: Textual's own set-up of a message (sender, time, propagation) still
runs, a handler is still found by the class's name, and a newer snapshot still replaces a queued older one."""

from __future__ import annotations

import dataclasses

from textual.message import Message

from gputui.ui import messages
from gputui.ui.messages import DrainProgress, SnapshotReady, WriteDone


def _message_classes() -> list[type[Message]]:
    return [c for c in vars(messages).values()
            if isinstance(c, type) and issubclass(c, Message) and c.__module__ == messages.__name__]


def test_every_message_is_a_dataclass_that_textual_sets_up():
    classes = _message_classes()
    assert len(classes) >= 13
    for cls in classes:
        assert dataclasses.is_dataclass(cls), cls.__name__
        fields = {f.name: None for f in dataclasses.fields(cls)}
        message = cls(**fields)
        # Message.__post_init__ ran: without it the message pump fails on the missing slots.
        assert message.time > 0 and message._prevent == set() and not message._stop_propagation, cls.__name__
        assert message.bubble


def test_handler_names_and_fields_stay_as_they_were():
    assert SnapshotReady.handler_name == "on_snapshot_ready"
    assert WriteDone.handler_name == "on_write_done"
    done = WriteDone("Cordon", "cordoned gpu-1", failed=False)
    assert (done.title, done.text, done.failed) == ("Cordon", "cordoned gpu-1", False)


def test_a_newer_snapshot_replaces_a_queued_one_and_a_drains_end_is_never_replaced():
    assert SnapshotReady(None, "old").can_replace(SnapshotReady(None, "new"))
    assert DrainProgress(False).can_replace(DrainProgress(False))
    assert not DrainProgress(False).can_replace(DrainProgress(True))
