"""Command mode (`:nodes`, `:drain gpu-node-3`...): parsing and completion, no UI.

The UI supplies what the arguments can be (nodes, services, contexts...) from
the snapshot it shows; this module only matches text against them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    arg: str | None  # what the argument is, e.g. "node"; None: takes none
    help: str
    aliases: tuple[str, ...] = ()
    optional: bool = False  # the argument may be left out


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("nodes", None, "the GPU nodes", ("node", "no")),
    CommandSpec("services", None, "the inference services", ("svc",)),
    CommandSpec("diag", None, "diagnostics: pending GPU pods, lost GPUs, drift", ("diagnostics",)),
    CommandSpec("check", None, "the seeds' validation checklists (as gputui check)", ("checks",)),
    CommandSpec("pools", None, "GPU use per node pool: allocated, unallocated, idle", ("pool",)),
    CommandSpec("versions", None, "driver, CUDA, kubelet, runtime, kernel, OS, GPU Operator and engines per node",
                ("ver",)),
    CommandSpec("disruptions", None, "every node being disrupted: actor, phase, age, why; stuck first",
                ("disruption", "dis")),
    CommandSpec("ctx", "context", "switch to another kubeconfig context", ("context",)),
    CommandSpec("fleet", None, "every cluster (contexts: in the config, or the kubeconfig's), one row each"),
    CommandSpec("ns", "namespace", "show one namespace's workloads (:ns all for every one)", ("namespace",)),
    CommandSpec("theme", "theme", "switch theme (no name: the picker)", optional=True),
    CommandSpec("keymap", "keymap", "switch keymap"),
    CommandSpec("drain", "node", "plan a drain of a node"),
    CommandSpec("cordon", "node", "cordon a node"),
    CommandSpec("uncordon", "node", "uncordon a node"),
    CommandSpec("shift", "service", "shift traffic between a service's versions"),
    CommandSpec("audit", None, "the audit log of every write"),
    CommandSpec("help", None, "the keys in force", ("h",)),
    CommandSpec("quit", None, "leave gputui", ("q", "q!")),
)

ALL_NAMESPACES = "all"


class CommandError(ValueError):
    """A command line that cannot run, worded for the operator."""


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    arg: str | None


def _by_name() -> dict[str, CommandSpec]:
    out: dict[str, CommandSpec] = {}
    for spec in COMMANDS:
        for name in (spec.name, *spec.aliases):
            out[name] = spec
    return out


_SPECS = _by_name()


def parse(line: str, choices: Mapping[str, Sequence[str]]) -> Command:
    """':drain gpu-node-1' -> Command('drain', 'gpu-node-1'); CommandError when it cannot run.

    `choices` maps an argument kind to its valid values; a kind absent from it
    accepts any value (checked later by whatever runs it).
    """
    words = line.strip().removeprefix(":").split()
    if not words:
        raise CommandError("empty command; try :help")
    spec = _SPECS.get(words[0])
    if spec is None:
        near = [s.name for s in COMMANDS if s.name.startswith(words[0][:2])]
        hint = f"; did you mean :{near[0]}?" if near else "; try :help"
        raise CommandError(f"unknown command :{words[0]}{hint}")
    if len(words) > 2 or (spec.arg is None and len(words) > 1):
        raise CommandError(f":{spec.name} takes {'no argument' if spec.arg is None else 'one ' + spec.arg}")
    arg = words[1] if len(words) == 2 else None
    if spec.arg is not None and arg is None and not spec.optional:
        raise CommandError(f":{spec.name} needs a {spec.arg} name")
    valid = choices.get(spec.arg or "")
    if arg is not None and valid is not None and arg not in valid:
        raise CommandError(f"no {spec.arg} {arg!r}")
    return Command(spec.name, arg)


def complete(line: str, choices: Mapping[str, Sequence[str]]) -> list[str]:
    """Every full command line that `line` can grow into, best first (for the suggester and menu)."""
    text = line.lstrip().removeprefix(":")
    head, space, rest = text.partition(" ")
    if not space:
        names = [s.name for s in COMMANDS if s.name.startswith(head)]
        if head in _SPECS and _SPECS[head].name not in names:  # an alias typed in full
            names.insert(0, _SPECS[head].name)
        return [n if _SPECS[n].arg is None else n + " " for n in names]
    spec = _SPECS.get(head)
    if spec is None or spec.arg is None:
        return []
    values = choices.get(spec.arg, ())
    prefix = rest.strip()
    starts = [v for v in values if v.startswith(prefix)]
    contains = [v for v in values if prefix in v and v not in starts]  # 'node-3' finds gpu-node-3
    return [f"{head} {v}" for v in starts + contains]
