"""Check results as text for a person, JSON for a script, JUnit XML for a CI pipeline."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from gputui.base.safe_text import xml_safe
from gputui.checks.result import CheckResult, Status

SIMULATED = "SIMULATED: demo cluster"
MARK = {Status.PASS: "PASS", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.UNKNOWN: "UNKNOWN"}


def counts(results: list[CheckResult]) -> dict[str, int]:
    return {s.value: sum(r.status is s for r in results) for s in Status}


def as_text(results: list[CheckResult], context: str, simulated: bool) -> str:
    lines = [f"# {SIMULATED}"] if simulated else []
    lines.append(f"gputui check on {context}")
    width = max((len(r.id) for r in results), default=0)
    for r in results:
        lines.append(f"{MARK[r.status]:<8}{r.id:<{width}}  [{r.seed}]  {r.summary}")
        if r.status is not Status.PASS and r.fix:
            first, *more = r.fix.split("\n")  # a fix of several lines (a config file's lines to add): indented
            lines.append(f"{'':<8}{'':<{width}}  fix: {first}")
            lines += [f"{'':<8}{'':<{width}}       {line}" for line in more]  # under the fix's text
    c = counts(results)
    lines.append(f"{c['pass']} passed, {c['warn']} warning{'s' * (c['warn'] != 1)}, {c['fail']} failed, "
                 f"{c['unknown']} unknown")
    return "\n".join(lines)


def as_json(results: list[CheckResult], context: str, simulated: bool) -> str:
    return json.dumps({
        "context": context, "simulated": simulated, "counts": counts(results),
        "checks": [{"id": r.id, "area": r.area, "seed": r.seed, "title": r.title, "status": r.status.value,
                    "summary": r.summary, "objects": list(r.objects), "fix": r.fix} for r in results],
    }, indent=2)


def as_junit(results: list[CheckResult], context: str, simulated: bool) -> str:
    """One testcase per check: a failure is a <failure>, an unknown an <error> (it could not be judged), a
    warning passes with its finding in <system-out>."""
    c = counts(results)
    suite = ET.Element("testsuite", name="gputui check", tests=str(len(results)), failures=str(c["fail"]),
                       errors=str(c["unknown"]), skipped="0")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="context", value=xml_safe(context))
    ET.SubElement(props, "property", name="simulated", value=str(simulated).lower())
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"gputui.{r.area}", name=r.id)
        # Summaries and objects carry cluster text (pod messages, names): ElementTree writes control
        # characters as they are, which no XML parser reads back.
        summary = xml_safe(r.summary)
        detail = xml_safe("\n".join([r.summary, *r.objects, *([f"fix: {r.fix}"] if r.fix else [])]))
        if r.status is Status.FAIL:
            ET.SubElement(case, "failure", message=summary, type="fail").text = detail
        elif r.status is Status.UNKNOWN:
            ET.SubElement(case, "error", message=summary, type="unknown").text = detail
        elif r.status is Status.WARN:
            ET.SubElement(case, "system-out").text = f"warning: {detail}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)
