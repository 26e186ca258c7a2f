"""What a DCGM diagnostic (`dcgmi diag -r 2 -j`) said about a node, read from its JSON: the verdict (pass, fail,
warn or unknown), DCGM's version, and each test with its per-GPU status, DCGM's messages and error codes.

The shapes read (tests/fixtures/dcgm_diag/SOURCES.md names the samples; the writers are NVIDIA/DCGM's
dcgmi/Diag.cpp and nvvs/include/NvvsJsonStrings.h at DCGM 3.3.8 and 4.6.0):
- DCGM 4.x `dcgmi diag -j`: {"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"entity_group": "GPU", "entity_id": 3, "status", "warnings": [{"warning", "error_id", ...}], "info": [...]}],
  "test_summary": {"status", "warnings"}}]}]}, "entity_groups": [...], "metadata": {"version", ...}}. A test
  that did not run on an entity has no result for it; "Warn" is written as "Fail" (Diag.cpp's default).
- DCGM 2.x/3.x `dcgmi diag -j`: the same tree under "DCGM GPU Diagnostic", results keyed by "gpu_id" (a string
  per GPU, or none for the Deployment checks), the version and driver at the top level, statuses Pass/Fail/Skip.
- NVVS's own JSON (what dcgmi 3.x read from nvvs; NVIDIA's test strings): "gpu_ids" ("0,1,2,3" or a number),
  statuses in capitals, `null` holes in the arrays.
- `dcgmi diag --iterations N -j`: {"iterations": [<one of the above>...], "Overall Result": "Pass"|"Fail"}.
- A run DCGM could not make: {"DCGM Diagnostic": {"version", "runtime_error": "..."}}.

Fail closed: text that holds no such object, a test that ran on no GPU (every result Skip or Not Run), a
status word not listed here, no tests at all, or a result too large to read whole is unknown, never pass.
Text around the JSON (a shell's or kubectl's lines, the "WARNING" line NVIDIA's own test feeds its parser) is
skipped. DCGM's messages are data: kept raw but bounded here, and made terminal-safe by `failing()` and
`warnings()` (safe_text.visible); a screen that parses markup must still pass them through markup_safe().
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from gputui.base.safe_text import visible

Verdict = Literal["pass", "fail", "warn", "unknown"]

# A result's status, in gputui's words. DCGM writes Pass/Fail/Warn/Skip/"Not Run" (NVVS: PASS, FAIL...).
PASS, FAIL, WARN, SKIP, NOT_RUN, UNKNOWN = "pass", "fail", "warn", "skip", "not run", "unknown"
_STATUS_WORDS = {
    "pass": PASS, "passed": PASS, "fail": FAIL, "failed": FAIL, "warn": WARN, "warning": WARN,
    "skip": SKIP, "skipped": SKIP, "not run": NOT_RUN, "not_run": NOT_RUN, "notrun": NOT_RUN,
}
_DIAG_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # 4.x, then 2.x/3.x and NVVS

# Bounds. A level-4 run on 8 GPUs with its info lines is well under 1 MB; a message is a sentence or two.
MAX_INPUT_CHARS = 8_000_000
MAX_DOCUMENTS = 8  # diagnostic objects read from one text (iterations count one each)
MAX_TESTS = 256
MAX_RESULTS = 512  # per test: one per entity (GPU, CPU, switch), at most a few dozen in practice
MAX_MESSAGES = 32  # per result
MAX_MESSAGE_CHARS = 2000
MAX_NAME_CHARS = 120
_MAX_JSON_STARTS = 64  # "{" positions tried before the text is called not JSON

# DCGM's plugin names (4.x; 3.x lists "Memory Bandwidth" etc. already in words) as a person reads them.
_TITLES = {
    "software": "Software", "pcie": "PCIe", "memory": "Memory", "memory_bandwidth": "Memory bandwidth",
    "diagnostic": "Diagnostic", "sm_stress": "SM stress", "targeted_stress": "Targeted stress",
    "targeted_power": "Targeted power", "pulse_test": "Pulse test", "memtest": "Memtest",
    "nvbandwidth": "NVBandwidth", "eud": "EUD", "cpu_eud": "CPU EUD", "context_create": "Context create",
}


@dataclass(frozen=True, slots=True)
class GpuResult:
    """One test's result on one entity ("GPU 3"; "GPUs 0,1,2,3" where NVVS grouped them; "" for the whole
    node, as 3.x writes the Deployment checks and 4.x a test's summary)."""

    gpu: str
    status: str  # PASS, FAIL, WARN, SKIP, NOT_RUN or UNKNOWN
    raw_status: str  # DCGM's word, bounded
    messages: tuple[str, ...] = ()  # DCGM's warnings: why it failed, warned or skipped
    error_codes: tuple[int, ...] = ()  # DCGM_FR_* ids (dcgm_errors.h), one per message that had one
    info: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DiagTest:
    name: str  # as DCGM wrote it, bounded ("memory_bandwidth", "Persistence Mode")
    category: str  # Deployment, Integration, Hardware, Stress, Custom; "" when not given
    results: tuple[GpuResult, ...]
    summary: GpuResult | None = None  # 4.x test_summary: the test's own status and every message

    @property
    def title(self) -> str:
        """The name in words: DCGM 4.x's plugin names mapped, 3.x's names (already words) as they are."""
        if self.name in _TITLES:
            return _TITLES[self.name]
        words = self.name.replace("_", " ").strip()
        return words[:1].upper() + words[1:] if words.islower() else words or "(unnamed test)"

    @property
    def status(self) -> str:
        """FAIL if any result or the summary failed; UNKNOWN for a word not known or no result at all; SKIP or
        NOT_RUN when no GPU ran it (the summary decides only for a test with no per-GPU result: a summary Pass
        over GPUs that all skipped proves nothing); WARN if any warned; PASS otherwise (a GPU may have skipped)."""
        entities = {r.status for r in self.results}
        summary = self.summary.status if self.summary is not None else None
        for worst in (FAIL, UNKNOWN):
            if worst in entities or summary == worst:
                return worst
        ran = entities or ({summary} if summary else set())
        if not ran:
            return UNKNOWN
        if PASS not in ran and WARN not in ran:
            return SKIP if SKIP in ran else NOT_RUN
        return WARN if WARN in ran or summary == WARN else PASS

    @property
    def error_codes(self) -> tuple[int, ...]:
        seen: dict[int, None] = {}
        for r in (*self.results, *([self.summary] if self.summary is not None else [])):
            seen.update(dict.fromkeys(r.error_codes))
        return tuple(seen)


@dataclass(frozen=True, slots=True)
class DiagResult:
    verdict: Verdict
    reason: str  # the verdict in one line of words; for unknown, what was missing
    tests: tuple[DiagTest, ...] = ()
    dcgm_version: str = ""  # "" when the output did not say
    driver_version: str = ""
    runtime_error: str = ""  # DCGM's words when it could not run the diagnostic
    overall_warning: str = ""  # --iterations: DCGM's reason for an overall Fail

    def failing(self) -> list[str]:
        """The failed tests in words, one line per failing GPU: "Memory on GPU 3: <DCGM's message>"."""
        lines: list[str] = []
        for test in self.tests:
            if test.status != FAIL:
                continue
            failed = [r for r in test.results if r.status == FAIL]
            if not failed and test.summary is not None:
                failed = [test.summary]
            lines.extend(_line(test, r, "failed, with no message from DCGM") for r in failed)
        if not lines and self.verdict == "fail":
            lines.append(visible(f"DCGM: overall result Fail: {self.overall_warning or 'no reason given'}"))
        return lines

    def warnings(self) -> list[str]:
        """What DCGM warned about, and the GPUs a test skipped (not proven): "Memory on GPU 0: skipped: ..."."""
        lines: list[str] = []
        for test in self.tests:
            before = len(lines)
            for r in test.results:
                if r.status == WARN:
                    lines.append(_line(test, r, "warned, with no message from DCGM"))
                elif r.status in (SKIP, NOT_RUN):
                    lines.append(_line(test, r, "", prefix="skipped" if r.status == SKIP else "not run"))
            if len(lines) == before and test.summary is not None and test.summary.status == WARN:
                lines.append(_line(test, test.summary, "warned, with no message from DCGM"))
        return lines


def _line(test: DiagTest, result: GpuResult, empty: str, prefix: str = "") -> str:
    where = f" on {result.gpu}" if result.gpu else ""
    # A skip's reason may be in its info ("Plugin is not allowed on this SKU"); a failure's info is a measurement.
    said = "; ".join(result.messages or (result.info[:1] if prefix else ())) or ("" if prefix else empty)
    body = f"{prefix}: {said}" if prefix and said else prefix or said
    return visible(f"{test.title}{where}: {body}")


def read_diag(text: str) -> DiagResult:
    """The verdict of one diagnostic run from `dcgmi diag -j`'s output (with whatever was printed around it)."""
    if len(text) > MAX_INPUT_CHARS:
        return DiagResult("unknown", f"the diagnostic's output is too large to read ({len(text)} characters)")
    if not text.strip():
        return DiagResult("unknown", "no output from the diagnostic")
    roots = list(_diag_objects(text))
    if not roots:
        looks_json = any(ch in text for ch in "{[")
        why = "holds no DCGM diagnostic result" if looks_json else "is not JSON"
        return DiagResult("unknown", visible(f"the diagnostic's output {why}: {text.strip()[:80]}"))
    reader = _Reader()
    for root in roots:
        reader.read_root(root)
    return reader.result()


def _diag_objects(text: str) -> Iterator[dict[str, Any]]:
    """Each JSON object in `text` shaped as a diagnostic result, skipping whatever else is printed around."""
    decoder = json.JSONDecoder()
    found = tries = 0
    start = text.find("{")
    while start != -1 and tries < _MAX_JSON_STARTS and found < MAX_DOCUMENTS:
        tries += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON here (or nested past Python's limit): try the next "{"
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and (_diag_object(value) is not None or isinstance(value.get("iterations"), list)):
            found += 1
            yield value
        start = text.find("{", end)


def _diag_object(root: dict[str, Any]) -> dict[str, Any] | None:
    for key in _DIAG_KEYS:
        if isinstance(root.get(key), dict):
            return dict(root[key])
    return None


class _Reader:
    """Gathers the tests of every diagnostic object read, and what made the result less than whole."""

    def __init__(self) -> None:
        self.tests: list[DiagTest] = []
        self.version = self.driver = self.runtime_error = self.overall_warning = ""
        self.overall_fail = False
        self.cut: list[str] = []  # what was too large and left unread: a pass can no longer be claimed

    def read_root(self, root: dict[str, Any]) -> None:
        iterations = root.get("iterations")
        if isinstance(iterations, list):
            self.overall_fail |= _word(root.get("Overall Result")) == FAIL
            self.overall_warning = self.overall_warning or _text(root.get("Warning"), MAX_MESSAGE_CHARS)
            for n, run in enumerate(iterations[:MAX_DOCUMENTS], start=1):
                if isinstance(run, dict):
                    self._read_one(run, f" (iteration {n})" if len(iterations) > 1 else "")
            if len(iterations) > MAX_DOCUMENTS:
                self.cut.append(f"{len(iterations)} iterations")
            return
        self._read_one(root, "")

    def _read_one(self, root: dict[str, Any], suffix: str) -> None:
        diag = _diag_object(root)
        if diag is None:
            return
        metadata: dict[str, Any] = root["metadata"] if isinstance(root.get("metadata"), dict) else {}
        for source in (metadata, root, diag):
            self.version = self.version or _text(source.get("version"), 64)
            self.driver = self.driver or _text(source.get("Driver Version Detected"), 64)
        self.runtime_error = self.runtime_error or _text(diag.get("runtime_error"), MAX_MESSAGE_CHARS)
        categories = diag.get("test_categories")
        if not isinstance(categories, list):
            return
        for category in categories:
            if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
                continue  # jsoncpp writes `null` for an array's holes
            for test in category["tests"]:
                if not isinstance(test, dict):
                    continue
                if len(self.tests) >= MAX_TESTS:
                    self.cut.append(f"more than {MAX_TESTS} tests")
                    return
                self.tests.append(_test(test, _text(category.get("category"), MAX_NAME_CHARS), suffix, self.cut))

    def result(self) -> DiagResult:
        tests = tuple(self.tests)
        failed = [t for t in tests if t.status == FAIL]
        verdict, reason = self._verdict(tests, failed)
        return DiagResult(verdict, reason, tests, self.version, self.driver, self.runtime_error, self.overall_warning)

    def _verdict(self, tests: tuple[DiagTest, ...], failed: list[DiagTest]) -> tuple[Verdict, str]:
        if failed:
            return "fail", visible(f"{len(failed)} of {len(tests)} tests failed: {', '.join(t.title for t in failed)}")
        if self.overall_fail:
            return "fail", visible(f"DCGM's overall result is Fail: {self.overall_warning or 'no reason given'}")
        if self.runtime_error:
            return "unknown", visible(f"DCGM could not run the diagnostic: {self.runtime_error}")
        if not tests:
            return "unknown", "the diagnostic's result lists no tests"
        if self.cut:
            return "unknown", f"the result was too large to read whole ({'; '.join(self.cut)}): a pass is not proven"
        odd = [t for t in tests if t.status == UNKNOWN]
        if odd:
            return "unknown", visible(f"no status gputui knows for: {', '.join(t.title for t in odd)}")
        idle = [t for t in tests if t.status in (SKIP, NOT_RUN)]
        if idle:
            return "unknown", visible(f"ran on no GPU (skipped or not run): {', '.join(t.title for t in idle)}")
        partial = [t for t in tests if any(r.status in (WARN, SKIP, NOT_RUN) for r in t.results)]
        if partial or any(t.status == WARN for t in tests):
            return "warn", visible(f"{len(tests)} tests ran without a failure; DCGM warned or skipped a GPU in: "
                                   f"{', '.join(t.title for t in partial) or 'a test summary'}")
        return "pass", f"all {len(tests)} tests passed"


def _test(raw: dict[str, Any], category: str, suffix: str, cut: list[str]) -> DiagTest:
    results_raw: list[Any] = raw["results"] if isinstance(raw.get("results"), list) else []
    results = tuple(_result(r) for r in results_raw[:MAX_RESULTS] if isinstance(r, dict))
    name = _text(raw.get("name"), MAX_NAME_CHARS) or "(unnamed test)"
    if len(results_raw) > MAX_RESULTS:
        cut.append(f"{name}: {len(results_raw)} results")
    summary = _result(raw["test_summary"]) if isinstance(raw.get("test_summary"), dict) else None
    return DiagTest(name + suffix, category, results, summary)


def _result(raw: dict[str, Any]) -> GpuResult:
    messages: list[str] = []
    codes: list[int] = []
    warnings = raw.get("warnings")
    for entry in (warnings if isinstance(warnings, list) else [warnings])[:MAX_MESSAGES]:
        if isinstance(entry, str):
            messages.append(_bounded(entry, MAX_MESSAGE_CHARS))
        elif isinstance(entry, dict):
            # "warnings" inside an entry: DCGM 3.x's Deployment checks write the message under that key.
            said = next((entry[k] for k in ("warning", "warnings", "message") if isinstance(entry.get(k), str)), "")
            messages.append(_bounded(said, MAX_MESSAGE_CHARS))
            code = entry.get("error_id")
            if isinstance(code, int) and not isinstance(code, bool):
                codes.append(code)
    info = raw.get("info")
    infos = [i for i in (info if isinstance(info, list) else [info]) if isinstance(i, str)][:MAX_MESSAGES]
    raw_status = _text(raw.get("status"), 40)
    return GpuResult(_entity(raw), _word(raw_status), raw_status, tuple(m for m in messages if m), tuple(codes),
                     tuple(_bounded(i, MAX_MESSAGE_CHARS) for i in infos))


def _entity(raw: dict[str, Any]) -> str:
    """Which entity a result is for: 4.x entity_group + entity_id, 3.x gpu_id, NVVS gpu_ids."""
    if "entity_id" in raw:
        group = _text(raw.get("entity_group"), 20) or "GPU"
        return f"{group} {_id(raw['entity_id'])}"
    for key in ("gpu_id", "gpu_ids"):
        if key in raw and raw[key] is not None:
            ids = _id(raw[key])
            return f"GPUs {ids}" if "," in ids else f"GPU {ids}"
    return ""


def _id(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _text(value, 60) or "?"


def _word(status: Any) -> str:
    return _STATUS_WORDS.get(status.strip().lower(), UNKNOWN) if isinstance(status, str) else UNKNOWN


def _text(value: Any, limit: int) -> str:
    return _bounded(value, limit) if isinstance(value, str) else ""


def _bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with the count of what was cut; control characters stay (data)."""
    return text if len(text) <= limit else f"{text[:limit]}…(+{len(text) - limit} chars)"
