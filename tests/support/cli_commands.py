"""Every gputui command that talks to a cluster, as the CLI tests run each one (shared by the tests of an
apiserver nobody answers for and of kubeconfigs gputui cannot use)."""

from __future__ import annotations

from gputui.ops.traffic.vocabulary import ROLLOUT_ACTIONS

SERVICE = "llm/chat"
COMMANDS: dict[str, tuple[str, ...]] = {
    "nodes": ("nodes",), "versions": ("versions",), "pools": ("pools",), "services": ("services",),
    "check": ("check",),
    "check --drill": ("check", "--drill", "gpu-a", "--yes-i-mean-it"),
    "drain": ("drain", "gpu-a"), "drain --dry-run": ("drain", "gpu-a", "--dry-run"), "drain --resume": ("drain", "--resume"),
    "shift": ("shift", SERVICE, "--to", "v2=50"), "shift --undo": ("shift", SERVICE, "--undo"),
    **{f"shift --rollout {verb}": ("shift", SERVICE, "--rollout", verb) for verb in ROLLOUT_ACTIONS},
    "rollout": ("rollout", SERVICE, "v2"),
    "scale-down": ("scale-down", SERVICE, "v1", "1"), "scale-down --dry-run": ("scale-down", SERVICE, "v1", "1", "--dry-run"),
}
