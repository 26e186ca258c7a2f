#!/usr/bin/env python3
"""Mutation testing of gputui's safety-critical code, module by module, with mutmut (pinned in mutation.sh).

Each target below is one module (or the few functions that hold one policy) and the fast tests that cover it
(tests/unit, tests/ui; never the integration or end-to-end suites: a mutant run must take seconds). For each
target the driver lays a snapshot of the working tree in mutants/<target>/ (gputui, its themes and keymaps,
the tests, pyproject.toml) with a setup.cfg that tells mutmut what to mutate and which tests to run, then runs
`mutmut run` there with one worker. mutmut first runs the selected tests once to learn which test reaches which
function, then runs each mutant against only those tests.

It prints, per target: mutants made, killed, survived, the score (killed / made; a mutant that made the tests
time out counts as killed, as mutmut's own score does), and each survivor with a one-line reason: the reason
docs/mutation.md gives when it lists the mutant as equivalent, else "not killed". Exit status 1 when a target
scores below --min-score (90), 2 when a run itself failed.

A second run reuses what the first learnt: killed mutants stay killed while their function and the test
selection are unchanged; survivors are run again (a new test may kill them). --fresh starts a target over.

    bash scripts/mutation.sh                          # every target
    bash scripts/mutation.sh drain/lease cordon       # some of them
    bash scripts/mutation.sh --list                   # the targets, their files and tests
    bash scripts/mutation.sh --rev HEAD drain/lease   # the committed code (others' unfinished edits left out)

docs/mutation.md lists equivalent mutants as lines of the form

    - `FUNCTION` `ORIGINAL LINE` → `MUTATED LINE`: why no test can tell them apart

where FUNCTION is the module's dotted path and function (`gputui.ops.drain.lease.holder_of`, a method as
`gputui.ops.drain.lease.Holder.describe`) and the lines are the changed line before and after, stripped: the
survivor listing prints each survivor in exactly that form, so an entry is copied from it. Mutant numbers are
not used: they move whenever the function changes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "mutants"
DOC = ROOT / "docs" / "mutation.md"
SEP = "ǁ"  # mutmut's separator of class and method in a mutant's name

KILLED = {1, 3, 36, -24, 24, 152, 255, -11, -9}  # mutmut's exit codes for killed and timed out (segfault: CPU limit)
STATUS = {0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 35: "suspicious", None: "not checked"}


@dataclass(frozen=True)
class Target:
    name: str
    files: tuple[str, ...]
    tests: tuple[str, ...]
    # Only these functions (mutmut name patterns, fnmatch), for a policy that lives in a few functions of a
    # larger module; empty: every function of the files.
    functions: tuple[str, ...] = ()
    # Edited by others while this was written: its figure is provisional, and it runs last.
    provisional: bool = False


U = "tests/unit/"
TARGETS: tuple[Target, ...] = (
    Target("drain/lease", ("gputui/ops/drain/lease.py",),
           (U + "test_lease_rules.py", U + "test_drain_run.py")),
    Target("drain/options", ("gputui/ops/drain/options.py",),
           (U + "test_drain_options_record.py", U + "test_drain_plan.py", U + "test_drain_run.py")),
    Target("drain/events", ("gputui/ops/drain/events.py",),
           (U + "test_drain_events.py", U + "test_drain_run.py")),
    Target("drain/report", ("gputui/ops/drain/report.py",),
           (U + "test_drain_report_lines.py", U + "test_drain_report_words.py", U + "test_drain_run.py")),
    Target("cordon", ("gputui/ops/cordon.py",),
           (U + "test_cordon_rules.py", U + "test_cordon_writes.py", U + "test_drain_run.py",
            U + "test_protected_contexts.py", U + "test_cordon_owner.py", U + "test_drain_via_maintenance.py", U + "test_node_lifecycle.py",
            U + "test_diag_gate.py", U + "test_audit.py")),
    Target("canary", ("gputui/ops/canary.py",),
           (U + "test_canary.py", U + "test_canary_rules.py", U + "test_canary_holds.py")),
    Target("scale_down", ("gputui/ops/scale_down.py",),
           (U + "test_scale_down.py", U + "test_scale_down_rules.py")),
    Target("traffic/apply", ("gputui/ops/traffic/apply.py",),
           (U + "test_traffic.py", U + "test_shift_apply_rules.py")),
    Target("traffic/adapters", ("gputui/ops/traffic/adapters.py",),
           (U + "test_traffic.py", U + "test_route_patch_rules.py")),
    Target("traffic/weights", ("gputui/ops/traffic/weights.py",),
           (U + "test_traffic.py", U + "test_weight_rules.py")),
    Target("traffic/argo", ("gputui/ops/traffic/argo.py",),
           (U + "test_traffic.py", U + "test_argo_verb_rules.py")),
    Target("traffic/undo", ("gputui/ops/traffic/undo.py",),
           (U + "test_traffic.py", U + "test_shift_undo_rules.py")),
    Target("kube_writer", ("gputui/backends/kube_writer.py",),
           (U + "test_kube_writer_answers.py", U + "test_kube_writer_objects.py", U + "test_exec_plugin.py")),
    Target("permissions", ("gputui/backends/base.py", "gputui/settings.py", "gputui/backends/factory.py"),
           (U + "test_permission_policy.py", U + "test_protected_contexts.py"),
           functions=(f"gputui.backends.base.x{SEP}Backend{SEP}can__mutmut_*",
                      f"gputui.backends.base.x{SEP}Backend{SEP}why_not__mutmut_*",
                      f"gputui.backends.base.x{SEP}Backend{SEP}why_not_any__mutmut_*",
                      f"gputui.backends.base.x{SEP}Backend{SEP}may__mutmut_*",
                      f"gputui.backends.base.x{SEP}Backend{SEP}_words__mutmut_*",
                      "gputui.settings.x_protection__mutmut_*",
                      "gputui.backends.factory.x_build_backend__mutmut_*")),
    Target("sessions", ("gputui/vocabulary/sessions.py",),
           (U + "test_sessions.py", U + "test_session_states.py")),
    Target("drain/batch", ("gputui/ops/drain/batch.py",),
           (U + "test_drain_batch_rules.py", U + "test_batch_cordon_first.py", U + "test_drain_placement_plan.py",
            U + "test_rotation_capacity.py", U + "test_drain_run.py", U + "test_batch_budget_runs.py"),
           provisional=True),
    Target("drain/out_of_rotation", ("gputui/ops/drain/out_of_rotation.py",),
           (U + "test_rotation_record_rules.py", U + "test_out_of_rotation_rules.py", U + "test_drain_rotation.py",
            U + "test_rotation.py", U + "test_cordon_rules.py", U + "test_rotation_capacity.py"), provisional=True),
    Target("drain/rotation_run", ("gputui/ops/drain/rotation_run.py",),
           (U + "test_rotation_run_rules.py", U + "test_drain_rotation.py", U + "test_rotation_capacity.py"),
           provisional=True),
    Target("drain/plan", ("gputui/ops/drain/plan.py", "gputui/ops/drain/batch_plan.py", "gputui/ops/drain/capacity.py",
                          "gputui/ops/drain/eviction_api.py"),
           (U + "test_drain_plan_rules.py", U + "test_drain_plan.py", U + "test_drain_placement_plan.py",
            U + "test_drain_arrivals.py", U + "test_drain_replaced.py", U + "test_drain_run.py",
            U + "test_eviction_requests.py", U + "test_batch_budget_runs.py", U + "test_drain_batch_rules.py",
            U + "test_batch_cordon_first.py", U + "test_drain_gpu_target.py", U + "test_drain_via_maintenance.py",
            U + "test_batch_plan_budgets.py"),
           provisional=True),
    Target("drain/maintenance_request", ("gputui/ops/drain/maintenance_request.py",),
           (U + "test_drain_via_maintenance.py", U + "test_maintenance_request_events.py")),
    Target("drain/lifecycle", ("gputui/ops/drain/lifecycle.py",), (U + "test_node_lifecycle.py",)),
    Target("drain/gpu_fence", ("gputui/ops/drain/gpu_fence.py",),
           (U + "test_gpu_fence_rules.py", U + "test_drain_gpu_target.py")),
    Target("drain/run", ("gputui/ops/drain/run.py", "gputui/ops/drain/pod_progress.py"),
           (U + "test_drain_run_rules.py", U + "test_drain_run_loop_rules.py", U + "test_drain_rotation_handoff_rules.py",
            U + "test_drain_poll_rules.py", U + "test_drain_poll_outcomes.py", U + "test_eviction_requests_run.py",
            U + "test_drain_run.py",
            U + "test_drain_rotation.py", U + "test_lease_rules.py",
            U + "test_drain_replaced.py", U + "test_forced_delete_refused.py", U + "test_rotation_capacity.py",
            U + "test_drain_via_maintenance.py", U + "test_node_lifecycle.py", U + "test_gpu_fence_rules.py"),
           provisional=True),
)

# Left out of every run: each surviving mutant of a drain module would pay for it (15 of the 27 s that
# test_drain_run.py takes); its claims are pinned by the example tests beside it and by the rules tests.
# test_json_patch_rfc6902 (the demo's JSON patch, none of these modules) mutates its parameters in place: mutmut's
# second pytest run in the same process (the clean run after the stats run) then fails it.
DESELECTED = ("tests/unit/test_drain_run.py::test_no_session_is_lost_unless_chosen_and_no_budget_is_violated",
              "tests/unit/test_traffic.py::test_json_patch_rfc6902")

# What each target's snapshot holds besides gputui/: the tests the fast suites import, and the files they read.
SKIP_DIRS = {"__pycache__", "integration", "e2e", ".pytest_cache", ".hypothesis"}


def slug(target: Target) -> str:
    return target.name.replace("/", "-")


def _same(a: Path, b: Path) -> bool:
    return b.exists() and a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def _sync_tree(src: Path, dst: Path) -> None:
    """dst as a copy of src; a file copied anew gets the time of now, so mutmut sees it changed."""
    wanted: set[Path] = set()
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            if name.endswith((".pyc", ".pyo")):
                continue
            rel = Path(root, name).relative_to(src)
            wanted.add(rel)
            if not _same(src / rel, dst / rel):
                (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / rel, dst / rel)
    if dst.exists():
        for root, _dirs, files in os.walk(dst):
            for name in files:
                rel = Path(root, name).relative_to(dst)
                if rel not in wanted and "__pycache__" not in rel.parts:
                    (dst / rel).unlink()


def source_tree(rev: str | None) -> Path:
    """Where the snapshot is taken from: the working tree, or the tree at commit `rev` plus the working tree's
    files that commit lacks (new tests being written), for a run that others' unfinished edits must not sway."""
    if rev is None:
        return ROOT
    src = WORK / f".source-{os.getpid()}"  # one per run: two runs at once must not share it
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "gputui", "themes", "keymaps", "tests",
                              "pyproject.toml"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    for top in ("gputui", "tests"):
        for root, dirs, files in os.walk(ROOT / top):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            for name in files:
                rel = Path(root, name).relative_to(ROOT)
                if not (src / rel).exists() and not name.endswith((".pyc", ".pyo")):
                    (src / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(ROOT / rel, src / rel)
    return src


def lay_out(target: Target, work: Path, src: Path) -> None:
    """The target's snapshot of the source tree, and the mutmut configuration for it."""
    work.mkdir(parents=True, exist_ok=True)
    _sync_tree(src / "gputui", work / "gputui")
    # The wheel maps themes/ and keymaps/ into the package (pyproject's package-dir): the mutated copy of gputui
    # is imported ahead of the installed one, so it carries them itself.
    _sync_tree(src / "themes", work / "gputui" / "themes")
    _sync_tree(src / "keymaps", work / "gputui" / "keymaps")
    _sync_tree(src / "tests", work / "tests")
    if not _same(src / "pyproject.toml", work / "pyproject.toml"):
        shutil.copyfile(src / "pyproject.toml", work / "pyproject.toml")

    def lines(values: tuple[str, ...] | list[str]) -> str:
        return "".join(f"\n    {v}" for v in values)

    config = (
        "[mutmut]\n"
        "source_paths = gputui\n"
        f"only_mutate ={lines(target.files)}\n"
        f"pytest_add_cli_args_test_selection ={lines(target.tests)}\n"
        # No pytest cache written into the snapshot between mutants (Hypothesis runs derandomized: tests/conftest.py).
        f"pytest_add_cli_args ={lines(['-p', 'no:cacheprovider', *(f'--deselect={d}' for d in DESELECTED)])}\n"
        # A mutant that makes a drain loop for ever is stopped after about 4x its tests' time, not mutmut's 30x.
        "timeout_multiplier = 2.0\n"
        "timeout_constant = 2.0\n"
        "use_git_change_detection = false\n"
        "use_setproctitle = false\n"
    )
    cfg = work / "setup.cfg"
    if not cfg.exists() or cfg.read_text() != config:
        cfg.write_text(config)


def load_meta(target: Target, work: Path) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for rel in target.files:
        meta = work / "mutants" / (rel + ".meta")
        if meta.exists():
            codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    if target.functions:
        from fnmatch import fnmatchcase

        codes = {k: v for k, v in codes.items() if any(fnmatchcase(k, p) for p in target.functions)}
    return codes


def reopen_survivors(target: Target, work: Path) -> None:
    """Mark every mutant not killed as unchecked, so mutmut runs it again (a new test may kill it now). Killed
    ones keep their verdict while their function is unchanged (mutmut resets a changed function's mutants
    itself); --fresh forgets them too."""
    for rel in target.files:
        meta = work / "mutants" / (rel + ".meta")
        if not meta.exists():
            continue
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        data["exit_code_by_key"] = {k: (v if v in KILLED else None) for k, v in codes.items()}
        meta.write_text(json.dumps(data, indent=4))


def run_mutmut(target: Target, work: Path, max_children: int, fresh: bool, log: Path) -> int:
    if fresh and (work / "mutants").exists():
        shutil.rmtree(work / "mutants")
    reopen_survivors(target, work)
    # Named functions (a policy inside a larger module): mutmut runs just their mutants, every time.
    cmd = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.argv[0] = 'mutmut'; cli()",
           "run", "--max-children", str(max_children), *target.functions]
    with open(log, "w") as out:
        return subprocess.call(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


_DIFF_SCRIPT = r"""
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant, find_mutant
out = {}
for name in json.loads(sys.stdin.read()):
    try:
        out[name] = get_diff_for_mutant(name, path=find_mutant(name).path)
    except Exception as exc:
        out[name] = "? " + repr(exc)
print(json.dumps(out))
"""


def diffs(work: Path, names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    done = subprocess.run([sys.executable, "-c", _DIFF_SCRIPT], cwd=work, input=json.dumps(names),
                          capture_output=True, text=True)
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {n: "? no diff: " + done.stderr.strip()[-200:] for n in names}


def function_of(mutant: str) -> str:
    """gputui.ops.drain.lease.x_holder_of__mutmut_3 -> gputui.ops.drain.lease.holder_of (a method:
    module.Class.method)."""
    base = mutant.partition("__mutmut_")[0]
    module, _, mangled = base.rpartition(".")
    if mangled.startswith("x" + SEP):
        _, cls, meth = mangled.split(SEP)
        return f"{module}.{cls}.{meth}"
    return f"{module}.{mangled[2:]}"


def mutmut_pattern(function: str) -> str:
    """gputui.ops.drain.run._poll -> mutmut's gputui.ops.drain.run.x__poll__mutmut_* (a method, module.Class.method:
    module.xǁClassǁmethod__mutmut_*): the inverse of function_of, for --only."""
    module, _, name = function.rpartition(".")
    if module and module.rpartition(".")[2][:1].isupper():  # module.Class.method
        module, _, cls = module.rpartition(".")
        return f"{module}.x{SEP}{cls}{SEP}{name}__mutmut_*"
    return f"{module}.x_{name}__mutmut_*"


def changed_lines(diff: str) -> tuple[str, str]:
    """The mutated line before and after, stripped (several changed lines are joined by ' ⏎ ')."""
    minus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return " ⏎ ".join(minus), " ⏎ ".join(plus)


ENTRY = re.compile(r"^- `(?P<func>[^`]+)` `(?P<old>.*?)` → `(?P<new>.*?)`: (?P<why>.+)$")


def equivalents() -> dict[tuple[str, str, str], str]:
    found: dict[tuple[str, str, str], str] = {}
    if DOC.exists():
        for line in DOC.read_text().splitlines():
            m = ENTRY.match(line.strip())
            if m:
                found[(m["func"], m["old"], m["new"])] = m["why"].strip()
    return found


@dataclass
class Figures:
    made: int
    killed: int
    survivors: list[tuple[str, str, str]]  # (mutant, its line in docs/mutation.md's form, reason)

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.made if self.made else 0.0

    @property
    def equivalent(self) -> int:
        return sum(1 for *_, why in self.survivors if not why.startswith(("not killed", "no test")))


def figures(target: Target, work: Path) -> Figures:
    codes = load_meta(target, work)
    alive = sorted(k for k, v in codes.items() if v not in KILLED)
    known = equivalents()
    shown = diffs(work, alive)
    survivors = []
    for name in alive:
        func = function_of(name)
        old, new = changed_lines(shown.get(name, ""))
        status = STATUS.get(codes[name], str(codes[name]))
        why = known.get((func, old, new))
        if why is None:
            why = "no test reaches this function" if status == "no tests" else \
                "not killed" if status == "survived" else f"not killed ({status})"
        else:
            why = "equivalent: " + why
        survivors.append((name, f"`{func}` `{old}` → `{new}`", why))
    return Figures(len(codes), len(codes) - len(alive), survivors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help="targets to run (default: all; --list names them)")
    parser.add_argument("--list", action="store_true", help="name the targets, their files and tests, and stop")
    parser.add_argument("--fresh", action="store_true", help="forget earlier verdicts of the targets run")
    parser.add_argument("--report-only", action="store_true", help="print the last run's figures, run nothing")
    parser.add_argument("--rev", metavar="COMMIT", help="mutate the tree at COMMIT (plus files it lacks, such as new "
                        "tests), not the working tree: others' unfinished edits then sway nothing")
    parser.add_argument("--only", metavar="FUNCTION", action="append", default=[],
                        help="mutate and count only these functions of the targets run (repeatable; names as the "
                        "survivor listing prints them, `*` allowed: gputui.ops.drain.run._poll, "
                        "gputui.ops.drain.plan.CapacityCheck.*): a module too big for the time at hand, its "
                        "safety-critical functions first")
    parser.add_argument("--max-children", type=int, default=1, help="mutmut workers (default 1: a shared machine)")
    parser.add_argument("--min-score", type=float, default=90.0, help="the score each target must reach")
    args = parser.parse_args(argv)

    by_name = {t.name: t for t in TARGETS}
    unknown = [n for n in args.targets if n not in by_name]
    if unknown:
        parser.error(f"unknown target {', '.join(unknown)} (targets: {', '.join(by_name)})")
    chosen = [by_name[n] for n in args.targets] if args.targets else list(TARGETS)
    if args.list:
        for t in TARGETS:
            print(f"{t.name}{' (provisional)' if t.provisional else ''}")
            print(f"    mutates {', '.join(t.files)}" + (f" (only {', '.join(t.functions)})" if t.functions else ""))
            print(f"    tests   {', '.join(t.tests)}")
        return 0

    summary: list[tuple[Target, Figures | None]] = []
    src = ROOT if args.report_only else source_tree(args.rev)
    for target in chosen:
        missing = [t for t in target.tests if not (src / t).exists()]
        tests = tuple(t for t in target.tests if t not in missing)
        functions = target.functions + tuple(mutmut_pattern(f) for f in args.only)
        target = Target(target.name, target.files, tests, functions, target.provisional)
        work = WORK / slug(target)
        print(f"== {target.name}: mutating {', '.join(target.files)}; tests {', '.join(tests)}", flush=True)
        if missing:
            print(f"   (not there, left out: {', '.join(missing)})")
        if not args.report_only:
            lay_out(target, work, src)
            log = work / "mutmut.log"
            rc = run_mutmut(target, work, args.max_children, args.fresh, log)
            if rc != 0:
                tail = log.read_text(errors="replace").strip().splitlines()[-15:]
                print(f"   mutmut failed (exit {rc}); the end of {log.relative_to(ROOT)}:")
                print("\n".join("   | " + ln for ln in tail))
                summary.append((target, None))
                continue
        fig = figures(target, work)
        print(f"   made {fig.made}, killed {fig.killed}, survived {fig.made - fig.killed} "
              f"({fig.equivalent} listed as equivalent), score {fig.score:.1f}%", flush=True)
        for name, form, why in fig.survivors:
            print(f"   - {name.rpartition('.')[2]}: {form}: {why}")
        summary.append((target, fig))

    if src != ROOT:
        shutil.rmtree(src, ignore_errors=True)
    print("\n== summary (score: killed / made)")
    worst = 0
    for target, result in summary:
        if result is None:
            print(f"   {target.name:24} run failed")
            worst = 2
            continue
        fig = result
        low = fig.score < args.min_score
        mark = "BELOW" if low else "ok"
        note = " (provisional: edited by others meanwhile)" if target.provisional else ""
        print(f"   {target.name:24} made {fig.made:4}  killed {fig.killed:4}  survived {fig.made - fig.killed:4}  "
              f"score {fig.score:5.1f}%  {mark}{note}")
        if low:
            worst = max(worst, 1)
    return worst


if __name__ == "__main__":
    sys.exit(main())
