"""API discovery when a group listed in /apis is gone by the time its version is read (a CRD being deleted, as
one integration test's teardown did while the next test's gputui started): that group serves nothing, and every
other group's kinds are read as they are. Any other failure still fails discovery (unknown, not "not installed").
Seen in a full run: NVSentinel's ExternalRemediationRequest, not installed, read "unknown: API discovery failed
(404: request failed)" because the janitor group's CRDs were being deleted."""

from __future__ import annotations

import pytest

from gputui.backends.kube_discovery import discover
from gputui.backends.kube_errors import ApiError
from gputui.vocabulary import nvsentinel_janitor as nj
from gputui.vocabulary.disruptions import MAINTENANCE_GROUP, NVSENTINEL_GROUP


class Conn:
    """/apis lists the janitor group, NVSentinel's and the maintenance-operator's; the janitor group's version
    answers `janitor_status` (a 2xx answer when None)."""

    def __init__(self, janitor_status: int | None) -> None:
        self.janitor_status = janitor_status
        self.asked: list[str] = []

    def request(self, method: str, path: str, *args: object, **kwargs: object) -> dict:
        self.asked.append(path)
        if path == "/apis":
            return {"groups": [{"name": g, "preferredVersion": {"version": v}, "versions": [{"version": v}]}
                               for g, v in ((nj.JANITOR_GROUP, "v1alpha1"), (NVSENTINEL_GROUP, "v1"),
                                            (MAINTENANCE_GROUP, "v1alpha1"))]}
        if path == f"/apis/{nj.JANITOR_GROUP}/v1alpha1":
            if self.janitor_status is not None:
                raise ApiError(self.janitor_status, f"{self.janitor_status}: request failed")
            return {"resources": [{"name": "rebootnodes"}]}
        if path == f"/apis/{NVSENTINEL_GROUP}/v1":
            return {"resources": [{"name": "externalremediationrequests"}, {"name": "maintenancerequests"}]}
        if path == f"/apis/{MAINTENANCE_GROUP}/v1alpha1":
            return {"resources": [{"name": "nodemaintenances"}]}
        raise AssertionError(path)


def test_a_group_gone_between_the_two_reads_serves_nothing_and_the_others_are_read():
    conn = Conn(janitor_status=404)
    served = discover(conn)  # type: ignore[arg-type]
    assert served.janitor == {}
    assert (served.remediations, served.maintenance_requests, served.maintenance) == ("v1", "v1", "v1alpha1")
    assert f"/apis/{NVSENTINEL_GROUP}/v1" in conn.asked  # read after the gone group, not skipped


def test_the_same_group_served_is_read():
    assert discover(Conn(janitor_status=None)).janitor == {nj.REBOOT_NODE: "v1alpha1"}  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [403, 500, 503])
def test_any_other_failure_still_fails_discovery(status):
    with pytest.raises(ApiError) as failed:
        discover(Conn(janitor_status=status))  # type: ignore[arg-type]
    assert failed.value.status == status
