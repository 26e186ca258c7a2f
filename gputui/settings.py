"""One frozen Settings object: defaults <- config file <- environment <- flags.

Every layer is validated the same way, and a bad value is one clear line
(SettingsError), never a traceback.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from gputui.base import validate
from gputui.base.paths import config_dir
from gputui.base.yaml_file import load_mapping
from gputui.policy.node_pools import DEFAULT_POOL_LABELS
from gputui.vocabulary.series_selectors import check_selector


class SettingsError(ValueError):
    """A bad setting, worded for the user in one line."""


# Where a pod or workload says which service and version it is (the first label found wins):
# the usual app labels, then KServe's and llm-d's.
DEFAULT_SERVICE_LABELS = ("app.kubernetes.io/name", "serving.kserve.io/inferenceservice", "llm-d.ai/model", "app")
DEFAULT_VERSION_LABELS = ("app.kubernetes.io/version", "version", "serving.kserve.io/revision")
# A Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True, slots=True)
class Settings:
    demo: bool = False
    seed: int = 7
    refresh: float = 2.0
    theme: str = "gputui-dark"
    keymap: str = "default"
    read_only: bool = False
    wallboard: bool = False
    wallboard_rotate: float = 15.0  # seconds each wallboard page stays up
    wallboard_heat: str = "util"  # what the heat map colours: util or temp
    cache: bool = True  # draw the context's last snapshot (CACHED) while the live read runs; keep one (snapshot_cache)
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    prometheus: str | None = None
    # Seconds a kubeconfig's exec credential plugin (aws, gcloud, kubelogin...) may take to hand out a
    # credential before it is stopped and the connection fails with its stderr: one that waits for a login
    # nobody will type must not hang gputui. Cloud plugins take a second or two; a login flow, longer.
    exec_timeout: float = 30.0
    # Seconds between fleet-wide DCGM reads (sessions are read every refresh). DCGM samples every 30 s
    # by default and is scraped every 15-30 s: asking more often only loads Prometheus. 0: every refresh.
    dcgm_interval: float = 15.0
    temp_threshold: float = 85.0
    drain_parallel: int = 1  # nodes drained at once in a maintenance batch
    session_deadline: float = 900.0  # seconds a drain waits on an inference pod's sessions
    # Seconds your inference engines take to stop after SIGTERM: drain plans warn about grace periods shorter
    # than a pod's preStop sleep plus this (engines' own shutdown timeouts vary by version and flags).
    engine_shutdown: float = 0.0
    audit_log: str | None = None
    # The DCGM diagnostic an uncordon can run first (`gputui uncordon NODE --diag`, gputui.ops.diag): the image holding
    # dcgmi and nv-hostengine (NVIDIA's DCGM image as the GPU Operator 25.x ships it), and `dcgmi diag -r LEVEL`
    # (1 quick, 2 medium, about 2 min, the default; 3 long, about 30 min; 4 extended, an hour or more).
    diag_image: str = "nvcr.io/nvidia/cloud-native/dcgm:4.5.2-1-ubuntu22.04"
    diag_level: int = 2
    # Whether gputui's drains set the node lifecycle conditions DrainInProgress and Drained (KEP-5683) that other
    # tools read: "auto" where the apiserver's NodeLifecycleConditions gate is on (read from its /metrics), "on"
    # always, "off" never.
    lifecycle_conditions: str = "auto"
    # How a drain takes the node: "cordon" (gputui cordons it) or "nodemaintenance" (as the maintenance-operator's
    # requestor: a NodeMaintenance in `maintenance_namespace`, which the operator's scheduler and cordon act on;
    # gputui.ops.drain.maintenance_request). `gputui drain --via` chooses per run.
    drain_via: str = "cordon"
    maintenance_namespace: str = "default"
    # Label that joins DCGM series to nodes; both spellings are tried when unset.
    host_label: str | None = None
    prometheus_ca_file: str | None = None
    prometheus_insecure: bool = False
    prometheus_headers: Mapping[str, str] = field(default_factory=dict)  # e.g. X-Scope-OrgID
    # Seconds each metrics query may take before its read counts as failed (its values then unknown). A store
    # answering for tens of thousands of nodes may need more than the default; a stuck one must not stall
    # the screen, so there is no retry.
    prometheus_timeout: float = 3.0
    # Labels naming a pod's or workload's service and version, first found wins (a list, or "a,b" in a string).
    service_labels: tuple[str, ...] = DEFAULT_SERVICE_LABELS
    version_labels: tuple[str, ...] = DEFAULT_VERSION_LABELS
    # Labels naming a node's pool, first found wins: the seeds' gpu.pool, then the clouds' and Karpenter's.
    pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS
    # Contexts gputui never writes to, by name or shell pattern ("prod-*"): read-only below the UI there.
    protected_contexts: tuple[str, ...] = ()
    # A fleet of clusters (`--context a,b` or `contexts:`): the fleet view polls each on its own.
    contexts: tuple[str, ...] = ()
    # Set on the gputui a browser page runs (`gputui serve`): :ctx and :fleet stay within the context(s) given.
    pin_context: bool = False
    # Inference engines' session series on top of the built-in table (vllm, sglang, tgi, trtllm, triton):
    # {engine: {running: [selector, ...], waiting: [selector, ...]}}; an engine named again is replaced.
    session_metrics: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)


_ENV = {
    "GPUTUI_REFRESH": "refresh",
    "GPUTUI_THEME": "theme",
    "GPUTUI_KEYMAP": "keymap",
    "GPUTUI_READ_ONLY": "read_only",
    "GPUTUI_PROMETHEUS": "prometheus",
    "GPUTUI_TEMP_THRESHOLD": "temp_threshold",
    "GPUTUI_AUDIT_LOG": "audit_log",
    "GPUTUI_WALLBOARD_ROTATE": "wallboard_rotate",
    "GPUTUI_DCGM_INTERVAL": "dcgm_interval",
    "GPUTUI_PROMETHEUS_TIMEOUT": "prometheus_timeout",
    "GPUTUI_EXEC_TIMEOUT": "exec_timeout",
    "GPUTUI_HOST_LABEL": "host_label",
    "GPUTUI_SERVICE_LABELS": "service_labels",
    "GPUTUI_VERSION_LABELS": "version_labels",
    "GPUTUI_POOL_LABELS": "pool_labels",
    "GPUTUI_PROTECTED_CONTEXTS": "protected_contexts",
    "GPUTUI_DIAG_IMAGE": "diag_image",
    "GPUTUI_DIAG_LEVEL": "diag_level",
    "GPUTUI_LIFECYCLE_CONDITIONS": "lifecycle_conditions",
    "GPUTUI_DRAIN_VIA": "drain_via",
}
_NAMES = {f.name for f in fields(Settings)}


def default_config_path() -> Path:
    return Path(os.environ.get("GPUTUI_CONFIG") or config_dir() / "config.yaml")


def _label_keys(name: str, value: Any, origin: str) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(k, str) for k in items):
        raise SettingsError(f"{origin}: {name}: expected a list of label names")
    keys = tuple(k.strip() for k in items if k.strip())
    if not keys:
        raise SettingsError(f"{origin}: {name}: give at least one label name")
    for key in keys:
        prefix, slash, label = key.rpartition("/")
        bad_prefix = slash and (len(prefix) > 253 or not _LABEL_PREFIX.fullmatch(prefix))
        if bad_prefix or not _LABEL_NAME.fullmatch(label):
            raise SettingsError(f"{origin}: {name}: {key!r} is not a valid label name")
    return keys


def _session_metrics(value: Any, origin: str) -> dict[str, dict[str, tuple[str, ...]]]:
    where = f"{origin}: session_metrics"
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: expected a mapping of engine names to running/waiting lists")
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for engine, spec in value.items():
        if not isinstance(engine, str) or not isinstance(spec, dict) or set(spec) - {"running", "waiting"}:
            raise SettingsError(f"{where}: {engine!r}: expected running: [...] and waiting: [...]")
        lists = {}
        for key, items in spec.items():
            items = [items] if isinstance(items, str) else items
            if not isinstance(items, list):
                raise SettingsError(f"{where}: {engine}.{key}: expected a list of series selectors")
            try:
                lists[key] = tuple(check_selector(i) for i in items)
            except ValueError as exc:
                raise SettingsError(f"{where}: {engine}.{key}: {exc}") from None
        out[engine] = lists
    return out


def _patterns(name: str, value: Any, origin: str) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(k, str) for k in items):
        raise SettingsError(f"{origin}: {name}: expected a list of context names or patterns")
    if name == "contexts":  # a fleet: each a context's name, none empty, none twice
        try:
            return validate.context_names(",".join(items)) if items else ()
        except ValueError as exc:
            raise SettingsError(f"{origin}: {name}: {exc}") from None
    return tuple(k.strip() for k in items if k.strip())


def protection(settings: Settings, context: str) -> str:
    """The protected_contexts entry that makes `context` read-only ("" when none does)."""
    return next((p for p in settings.protected_contexts if fnmatchcase(context, p)), "")


# Text settings checked beyond being text: what reaches an API path, a query or a URL.
_TEXT_CHECKS = {
    "namespace": validate.namespace,
    "prometheus": validate.prometheus_url,
    "host_label": validate.prom_label,
    "context": lambda v: ",".join(validate.context_names(v)),  # "a,b": a fleet (load_settings splits it)
    "kubeconfig": validate.path,
    "audit_log": validate.path,
    "prometheus_ca_file": validate.path,
}
_TYPES = {f.name: str(f.type) for f in fields(Settings)}


def _coerce(name: str, value: Any, origin: str) -> Any:
    """A value of the config file (YAML: any type), a variable or a flag, checked by the field's type: a mapping
    where a path is expected, a float where a count is, NaN or infinities are refused, never turned into text."""
    if name == "session_metrics":
        return _session_metrics(value, origin)
    if name in ("protected_contexts", "contexts"):
        return _patterns(name, value, origin)
    kind = _TYPES[name]
    if kind.startswith("tuple"):
        return _label_keys(name, value, origin)
    try:
        if kind.startswith("Mapping"):
            if not isinstance(value, dict):
                raise ValueError("expected a mapping of names to text")
            return dict(validate.header(k, v) for k, v in value.items())
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            word = value.strip().lower() if isinstance(value, str) else None
            if word in ("1", "true", "yes", "on"):
                return True
            if word in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"{value!r} is not true or false")
        if kind == "int":
            return validate.whole(value)
        if kind == "float":
            return validate.number(value)
        optional = "None" in kind
        if optional and (value is None or (isinstance(value, str) and not value.strip())):
            return None
        text = validate.text(value).strip()
        check = _TEXT_CHECKS.get(name)
        return check(text) if check else text
    except SettingsError:
        raise
    except ValueError as exc:
        raise SettingsError(f"{origin}: {name}: {exc}") from None


def _check(s: Settings) -> Settings:
    if not (s.refresh > 0):
        raise SettingsError(f"refresh must be a positive number of seconds, got {s.refresh:g}")
    if s.refresh > 3600:
        raise SettingsError(f"refresh {s.refresh:g}s is over an hour; give seconds")
    if not (0 <= s.dcgm_interval <= 3600):
        raise SettingsError(f"dcgm_interval must be between 0 and 3600 seconds, got {s.dcgm_interval:g}")
    if not (math.isfinite(s.exec_timeout) and s.exec_timeout > 0):
        raise SettingsError(f"exec_timeout must be a positive number of seconds, got {s.exec_timeout:g}")
    if not (0 < s.prometheus_timeout <= 300):
        raise SettingsError(f"prometheus_timeout must be between 0 and 300 seconds, got {s.prometheus_timeout:g}")
    if s.drain_parallel < 1:
        raise SettingsError(f"drain_parallel must be at least 1, got {s.drain_parallel}")
    if s.engine_shutdown < 0:
        raise SettingsError(f"engine_shutdown must be 0 or more seconds, got {s.engine_shutdown:g}")
    if s.session_deadline <= 0:
        raise SettingsError(f"session_deadline must be positive seconds, got {s.session_deadline:g}")
    if s.lifecycle_conditions not in ("auto", "on", "off"):
        raise SettingsError(f"lifecycle_conditions must be auto, on or off, got {s.lifecycle_conditions[:40]!r}")
    if s.drain_via not in ("cordon", "nodemaintenance"):
        raise SettingsError(f"drain_via must be cordon or nodemaintenance, got {s.drain_via[:40]!r}")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", s.maintenance_namespace):
        raise SettingsError(f"maintenance_namespace must be a namespace name, got {s.maintenance_namespace[:80]!r}")
    if s.diag_level not in (1, 2, 3, 4):
        raise SettingsError(f"diag_level must be 1, 2, 3 or 4 (dcgmi diag -r), got {s.diag_level}")
    if not s.diag_image.strip() or any(c.isspace() or not c.isprintable() for c in s.diag_image) \
            or len(s.diag_image) > 512:
        raise SettingsError(f"diag_image must be one image reference (no spaces), got {s.diag_image[:80]!r}")
    if not (0 < s.temp_threshold < 200):
        raise SettingsError(f"temp_threshold must be between 0 and 200 °C, got {s.temp_threshold:g}")
    if not (s.wallboard_rotate >= 1):
        raise SettingsError(f"wallboard_rotate must be at least 1 second, got {s.wallboard_rotate:g}")
    if s.wallboard_heat not in ("util", "temp"):
        raise SettingsError(f"wallboard_heat must be util or temp, got {s.wallboard_heat!r}")
    # Upper bounds: a value past them is a typo (or units mistaken), and some would overflow a timer.
    for name, most in (("wallboard_rotate", 86400), ("session_deadline", validate.MAX_DURATION_S),
                       ("engine_shutdown", 86400), ("drain_parallel", 1000)):
        if getattr(s, name) > most:
            raise SettingsError(f"{name} must be at most {most:g}, got {getattr(s, name):g}")
    return s


def _apply(base: Settings, values: Mapping[str, Any], origin: str) -> Settings:
    changes = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise SettingsError(f"{origin}: setting names are text, got {key!r}")
        name = key.replace("-", "_")
        if name not in _NAMES:
            raise SettingsError(f"{origin}: unknown setting {key!r}")
        changes[name] = _coerce(name, value, origin)
    return replace(base, **changes)


def load_config_file(path: Path) -> dict[str, Any]:
    """The config file's mapping ({} when there is none), read by the one YAML reader (size and aliases bounded)."""
    try:
        if not path.exists():
            return {}
        return load_mapping(path, empty_ok=True)
    except OSError as exc:  # a name too long for the file system
        raise SettingsError(f"{str(path)[:80]}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SettingsError(f"{path}: {exc}") from None


def load_settings(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> Settings:
    """Defaults, then the config file, then GPUTUI_* variables, then flags given."""
    env = os.environ if env is None else env
    path = config_path or default_config_path()
    settings = _apply(Settings(), load_config_file(path), str(path))
    for var, name in _ENV.items():  # each named in its error: `GPUTUI_REFRESH: refresh: 'x' is not a number`
        if env.get(var):
            settings = _apply(settings, {name: env[var]}, var)
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    settings = _apply(settings, given, "flag")
    if settings.wallboard:
        settings = replace(settings, read_only=True)
    if settings.context and "," in settings.context:  # --context a,b: a fleet, the first one in front
        names = tuple(dict.fromkeys(c.strip() for c in settings.context.split(",") if c.strip()))
        settings = replace(settings, context=names[0] if names else None, contexts=names)
    elif settings.contexts and not settings.context:
        settings = replace(settings, context=settings.contexts[0])
    return _check(settings)
