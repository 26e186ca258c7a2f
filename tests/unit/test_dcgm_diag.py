"""The DCGM diagnostic reader on the samples in tests/fixtures/dcgm_diag (SOURCES.md says which are real), on
the shapes DCGM's writers produce, and fail-closed on everything else: unknown is never pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gputui.base.safe_text import MAX_FIELD, is_clean
from gputui.vocabulary.dcgm_diag import MAX_MESSAGE_CHARS, MAX_NAME_CHARS, MAX_TESTS, read_diag

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm_diag"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def doc4(name: str = "synthetic_dcgm_4.x_pass.json") -> dict[str, Any]:
    out: dict[str, Any] = json.loads(sample(name))
    return out


def memory_results(doc: dict[str, Any]) -> list[dict[str, Any]]:
    categories = doc["DCGM Diagnostic"]["test_categories"]
    test = next(t for c in categories for t in c["tests"] if t["name"] == "memory")
    results: list[dict[str, Any]] = test["results"]
    return results


# --- the samples ---------------------------------------------------------------------------------------------


def test_nvidias_real_output_passes_with_its_tests_named_despite_the_line_before_it() -> None:
    text = sample("nvidia_dcgm_nvvs_3.1.0_real_output_pass.txt")
    assert text.lstrip().startswith("WARNING: THIS SHOULD NOT HAPPEN")  # the preamble is part of the sample
    result = read_diag(text)
    assert result.verdict == "pass", result.reason
    assert result.dcgm_version == "3.1.0"
    names = [t.name for t in result.tests]
    assert names[:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert "Persistence Mode" in names and "software" in names
    assert len(names) == 10  # the `null` holes between tests are not tests
    software = next(t for t in result.tests if t.name == "software")
    assert software.category == "Custom"
    assert [r.gpu for r in software.results] == [f"GPU {i}" for i in range(8)]
    assert {r.status for r in software.results} == {"pass"}
    assert result.tests[0].results[0].gpu == "GPUs 0,1,2,3,4,5,6,7"
    assert result.failing() == [] and result.warnings() == []


def test_nvidias_per_gpu_string_fails_naming_each_gpu_and_dcgms_message() -> None:
    result = read_diag(sample("nvidia_dcgm_nvvs_1.7_per_gpu_sm_stress_fail.json"))
    assert result.verdict == "fail"
    assert result.reason == "1 of 17 tests failed: SM stress"
    assert result.failing() == [
        "SM stress on GPU 0: Max stress level of 2128.7 did not exceed desired stress level of 3000.0 for GPU 0",
        "SM stress on GPU 2: Max stress level of 1096.5 did not exceed desired stress level of 3000.0 for GPU 2",
        "SM stress on GPU 3: Max stress level of 1099.7 did not exceed desired stress level of 3000.0 for GPU 3",
    ]
    sm_stress = next(t for t in result.tests if t.name == "sm_stress")
    assert sm_stress.category == "Stress" and sm_stress.error_codes == (50,)
    assert [(r.gpu, r.status) for r in sm_stress.results] == [
        ("GPU 0", "fail"), ("GPU 1", "pass"), ("GPU 2", "fail"), ("GPU 3", "fail")]
    # A GPU the memory test skipped is not proven: said, with DCGM's reason.
    assert ('Memory on GPU 0: skipped: ECC memory on GPU 0 is not currently active. Please use "nvidia-smi -i 0 '
            '-e 1" to enable and reboot.') in result.warnings()


def test_gcms_status_only_pass_names_its_tests() -> None:
    result = read_diag(sample("gcm_diag_pass_output.json"))
    assert result.verdict == "pass"
    assert [t.name for t in result.tests] == [
        "Blacklist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
        "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"]
    assert all(t.category == "Deployment" and t.results[0].gpu == "" for t in result.tests)
    assert result.dcgm_version == ""


def test_gcms_edited_fail_fails_and_keeps_the_warning() -> None:
    result = read_diag(sample("gcm_diag_fail_output.json"))
    assert result.verdict == "fail"
    assert result.failing() == ["Persistence Mode: failed, with no message from DCGM"]
    assert result.warnings() == ["Environment Variables: warned, with no message from DCGM"]


def test_dcgm4_failure_names_the_test_the_gpu_and_dcgms_message_once() -> None:
    result = read_diag(sample("synthetic_dcgm_4.x_memory_fail_gpu3.json"))
    assert result.verdict == "fail"
    assert (result.dcgm_version, result.driver_version) == ("4.6.0", "580.95.05")
    # Once: the test_summary repeats the message, and is not a second failing line.
    assert result.failing() == ["Memory on GPU 3: GPU 3 had uncorrectable memory errors and row remapping failed."]
    memory = next(t for t in result.tests if t.name == "memory")
    assert memory.category == "Hardware" and memory.error_codes == (80,)
    assert memory.results[3].error_codes == (80,) and memory.results[0].status == "pass"


def test_dcgm4_pass() -> None:
    result = read_diag(sample("synthetic_dcgm_4.x_pass.json"))
    assert result.verdict == "pass", result.reason
    assert [(t.category, t.name, t.title) for t in result.tests] == [
        ("Deployment", "software", "Software"), ("Integration", "pcie", "PCIe"), ("Hardware", "memory", "Memory")]
    assert all([r.gpu for r in t.results] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"] for t in result.tests)


def test_dcgm4_summary_fail_with_every_gpu_passing_is_a_failure() -> None:
    doc = doc4()
    test = doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]
    test["test_summary"] = {"status": "Fail", "warnings": [{"warning": "PCIe link trained at x8", "error_id": 36}]}
    result = read_diag(json.dumps(doc))
    assert result.verdict == "fail"
    assert result.failing() == ["PCIe: PCIe link trained at x8"]


def test_dcgm3_dcgmi_shape_reads_gpu_id_version_and_the_deployment_message_key() -> None:
    # Not a sample: the document DCGM 3.3.8's Diag.cpp writes for a failed Deployment check (its message sits
    # under "warnings" inside the entry) and a per-GPU test ("gpu_id" a string), version at the top level.
    text = json.dumps({
        "DCGM GPU Diagnostic": {"test_categories": [
            {"category": "Deployment", "tests": [{"name": "Persistence Mode", "results": [
                {"gpu_id": 1, "status": "Fail", "warnings": [
                    {"warnings": "Persistence mode for GPU 1 is disabled.", "error_id": 29}]}]}]},
            {"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [
                {"gpu_id": "0", "status": "Pass", "info": "Allocated 16583361795 bytes (97.2%)"}]}]}]},
        "version": "3.3.8", "Driver Version Detected": "550.54.15"})
    result = read_diag("Defaulted container \"diag\" out of: diag\n" + text + "\n")
    assert result.verdict == "fail"
    assert (result.dcgm_version, result.driver_version) == ("3.3.8", "550.54.15")
    assert result.failing() == ["Persistence Mode on GPU 1: Persistence mode for GPU 1 is disabled."]
    assert result.tests[1].results[0].info == ("Allocated 16583361795 bytes (97.2%)",)


def test_text_around_the_json_and_other_json_lines_are_skipped() -> None:
    text = ('{"level": "info", "msg": "starting dcgmi"}\n' + sample("synthetic_dcgm_4.x_memory_fail_gpu3.json")
            + "command terminated with exit code 226\n")
    assert read_diag(text).verdict == "fail"


def test_a_brace_in_the_text_before_the_json_does_not_hide_it() -> None:
    text = "+ exec dcgmi diag -r 2 -j  # level {2}\n" + sample("synthetic_dcgm_4.x_memory_fail_gpu3.json")
    assert read_diag(text).verdict == "fail"


def test_a_later_failing_document_is_not_hidden_by_an_earlier_pass() -> None:
    text = sample("synthetic_dcgm_4.x_pass.json") + sample("synthetic_dcgm_4.x_memory_fail_gpu3.json")
    result = read_diag(text)
    assert result.verdict == "fail" and len(result.tests) == 6


def test_iterations_fail_when_one_run_fails_and_when_dcgm_says_so() -> None:
    runs = {"iterations": [doc4(), doc4("synthetic_dcgm_4.x_memory_fail_gpu3.json")], "Overall Result": "Fail"}
    result = read_diag(json.dumps(runs))
    assert result.verdict == "fail"
    assert result.failing() == [
        "Memory (iteration 2) on GPU 3: GPU 3 had uncorrectable memory errors and row remapping failed."]
    said_only = {"iterations": [doc4()], "Overall Result": "Fail", "Warning": "The diagnostic was stopped"}
    result = read_diag(json.dumps(said_only))
    assert result.verdict == "fail"
    assert result.failing() == ["DCGM: overall result Fail: The diagnostic was stopped"]


# --- fail closed -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, says", [
    ("", "no output"),
    ("   \n", "no output"),
    ("Error: unable to establish a connection to the specified host: localhost", "is not JSON"),
    ('{"foo": 1}', "holds no DCGM diagnostic result"),
    ("[1, 2, 3]", "holds no DCGM diagnostic result"),
    ('{"DCGM Diagnostic": "passed"}', "holds no DCGM diagnostic result"),
    ('{"DCGM Diagnostic": {}}', "lists no tests"),
    ('{"DCGM GPU Diagnostic": {"test_categories": []}}', "lists no tests"),
    ('{"DCGM Diagnostic": {"test_categories": [null, {"category": "Hardware", "tests": [null]}]}}', "lists no tests"),
    ('{"iterations": [], "Overall Result": "Pass"}', "lists no tests"),
    ("[" * 100_000, "holds no DCGM diagnostic result"),
])
def test_output_that_is_not_a_result_is_unknown(text: str, says: str) -> None:
    result = read_diag(text)
    assert result.verdict == "unknown"
    assert says in result.reason
    assert result.failing() == []


def test_a_result_cut_short_is_unknown() -> None:
    text = sample("synthetic_dcgm_4.x_pass.json")
    assert read_diag(text[: len(text) // 2]).verdict == "unknown"


def test_deep_nesting_is_unknown_not_a_crash() -> None:
    text = '{"DCGM Diagnostic": {"test_categories": ' + "[" * 50_000 + "]" * 50_000 + "}}"
    assert read_diag(text).verdict == "unknown"


def test_a_test_that_ran_on_no_gpu_makes_the_run_unknown() -> None:
    doc = doc4()
    for r in memory_results(doc):
        r["status"] = "Skip"
    result = read_diag(json.dumps(doc))  # its test_summary still says Pass: that proves nothing
    assert result.verdict == "unknown"
    assert result.reason == "ran on no GPU (skipped or not run): Memory"
    doc = doc4()
    for r in memory_results(doc):
        r["status"] = "Not Run"
    assert read_diag(json.dumps(doc)).verdict == "unknown"


def test_everything_skipped_is_unknown() -> None:
    doc = doc4()
    for category in doc["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            test["test_summary"]["status"] = "Skip"
            for r in test["results"]:
                r["status"] = "Skip"
    assert read_diag(json.dumps(doc)).verdict == "unknown"


def test_a_test_with_no_results_is_unknown() -> None:
    doc = doc4()
    test = doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    test["results"] = []
    del test["test_summary"]
    result = read_diag(json.dumps(doc))
    assert result.verdict == "unknown" and "Memory" in result.reason


@pytest.mark.parametrize("status", ["Inconclusive", "", None, 1, "PASSED WITH ERRORS"])
def test_a_status_word_not_known_is_unknown_never_pass(status: Any) -> None:
    doc = doc4()
    memory_results(doc)[2]["status"] = status
    result = read_diag(json.dumps(doc))
    assert result.verdict == "unknown"
    assert result.reason == "no status gputui knows for: Memory"


def test_one_gpu_skipped_in_a_passing_test_is_a_warning_not_a_pass() -> None:
    doc = doc4()
    memory_results(doc)[0].update(status="Skip", warnings=[{"warning": "ECC memory is not enabled.", "error_id": 55}])
    result = read_diag(json.dumps(doc))
    assert result.verdict == "warn"
    assert result.warnings() == ["Memory on GPU 0: skipped: ECC memory is not enabled."]


def test_a_skip_explained_only_in_info_says_why_and_a_summary_warning_is_listed() -> None:
    doc = doc4()
    memory_results(doc)[1].update(status="Skip", info=["Plugin is not allowed on this SKU"])
    pcie = doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]
    pcie["test_summary"] = {"status": "Warn", "warnings": [{"warning": "PCIe replay rate is high", "error_id": 9}]}
    result = read_diag(json.dumps(doc))
    assert result.verdict == "warn"
    assert result.warnings() == ["PCIe: PCIe replay rate is high", "Memory on GPU 1: skipped: Plugin is not allowed on this SKU"]


def test_a_runtime_error_is_unknown_with_dcgms_words() -> None:
    text = json.dumps({"DCGM Diagnostic": {"version": "4.6.0", "runtime_error": "Error: GPU 0 is not supported"}})
    result = read_diag(text)
    assert result.verdict == "unknown"
    assert result.runtime_error == "Error: GPU 0 is not supported"
    assert result.reason == "DCGM could not run the diagnostic: Error: GPU 0 is not supported"
    assert result.dcgm_version == "4.6.0"


def test_too_many_tests_to_read_whole_is_unknown() -> None:
    tests = [{"name": f"t{i}", "results": [{"gpu_id": "0", "status": "Pass"}]} for i in range(MAX_TESTS + 1)]
    text = json.dumps({"DCGM GPU Diagnostic": {"test_categories": [{"category": "Custom", "tests": tests}]}})
    result = read_diag(text)
    assert result.verdict == "unknown" and "too large" in result.reason
    assert len(result.tests) == MAX_TESTS


def test_output_too_large_is_unknown() -> None:
    assert read_diag(" " * 8_000_001 + "{}").verdict == "unknown"


# --- hostile text --------------------------------------------------------------------------------------------


def test_hostile_messages_are_kept_as_data_bounded_and_made_safe_to_show() -> None:
    hostile = "[/bold][red]\x1b]0;owned\x07\x1b[2J\u202eevil\x9b" + "A" * 10_000
    doc = doc4("synthetic_dcgm_4.x_memory_fail_gpu3.json")
    failing = memory_results(doc)[3]
    failing["warnings"][0]["warning"] = hostile
    failing["entity_group"] = "GPU\x1b[31m" + "x" * 500
    doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]["name"] = "mem\x1b[2Jory" + "y" * 10_000
    result = read_diag(json.dumps(doc))
    assert result.verdict == "fail"
    test = next(t for t in result.tests if t.name.startswith("mem"))
    kept = test.results[3].messages[0]
    assert kept.startswith("[/bold][red]\x1b]0;owned\x07")  # data, unchanged
    assert len(kept) <= MAX_MESSAGE_CHARS + 20 and kept.endswith("chars)")
    assert len(test.name) <= MAX_NAME_CHARS + 20
    [line] = result.failing()
    assert is_clean(line) and "\n" not in line
    assert len(line) <= MAX_FIELD + 40  # the cut, its count, and C1 controls shown as <U+009B>
    assert "␛]0;owned␇" in line  # shown, not acted on


def test_a_hostile_reason_is_safe_to_show() -> None:
    result = read_diag("\x1b]0;owned\x07 not json at all\n\u202e")
    assert result.verdict == "unknown" and is_clean(result.reason)
    result = read_diag(json.dumps({"DCGM Diagnostic": {"runtime_error": "\x1b[2J" + "E" * 10_000}}))
    assert is_clean(result.reason) and len(result.reason) <= MAX_FIELD + 20


def test_the_samples_are_not_changed_by_reading() -> None:
    doc = doc4("synthetic_dcgm_4.x_memory_fail_gpu3.json")
    before = copy.deepcopy(doc)
    read_diag(json.dumps(doc))
    assert doc == before
