"""Reading kubeconfig as kubectl would (several files in KUBECONFIG, contexts, in-cluster config) and
connecting by it (`connect`, which makes a kube_http.Connection), through the official client's loader.

Two parts of the client's loading are gputui's own, because the client's cannot wait a bounded time or keep
a secret off the disk: exec credential plugins (gputui.backends.exec_plugins) and client keys and
certificates given as data (gputui.backends.key_files).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from gputui.backends.base import BackendError
from gputui.backends.exec_plugins import EXEC_TIMEOUT_S, loader_class
from gputui.backends.key_files import keep_key_files_in_memory
from gputui.backends.kube_http import Connection
from gputui.base.errors import first_line, one_line
from gputui.base.safe_text import visible
from gputui.base.yaml_file import load_text


def kubeconfig_files(kubeconfig: str | None = None) -> list[Path]:
    """The files kubectl would read, the one place that decides: --kubeconfig, else KUBECONFIG's list, else
    ~/.kube/config."""
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def target_context(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The context `connect` would use ("in-cluster" inside a pod), read from the kubeconfig only: no
    credential plugin runs and nothing is sent. A bad kubeconfig or an unknown context is one clear line."""
    files = kubeconfig_files(kubeconfig)
    if _in_cluster(kubeconfig, files):
        return "in-cluster"
    joined, current = _chosen_context(kubeconfig, context, files)
    _loader_for(joined, context)  # the context's cluster and user exist
    return str(current.get("name", context or ""))


def connect(
    kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None,
    exec_timeout: float = EXEC_TIMEOUT_S,
) -> Connection:
    """Load configuration exactly as kubectl resolves it; one clear line when it is bad. An exec credential
    plugin runs here, for `exec_timeout` seconds at most (and again whenever its credential expires)."""
    from kubernetes import client, config  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    _quiet_library_logs()
    keep_key_files_in_memory()
    configuration = client.Configuration()
    user = ""
    default_ns = "default"
    files = kubeconfig_files(kubeconfig)
    if _in_cluster(kubeconfig, files):
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise BackendError(f"in-cluster config: {exc}") from None
        ctx_name = "in-cluster"
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                default_ns = f.read().strip() or default_ns
        except OSError:
            pass
    else:
        joined, current = _chosen_context(kubeconfig, context, files)
        loader = _loader_for(joined, context)
        loader.exec_timeout = exec_timeout
        try:
            loader.load_and_set(configuration)
        except BackendError:
            raise
        except ConfigException as exc:
            raise BackendError(_config_error(str(exc), context)) from None
        except Exception as exc:  # noqa: BLE001 - a shape kubeconfig_problem does not know: still the files it came from
            raise BackendError(f"kubeconfig {_names(joined)} is not valid: {one_line(exc)}") from None
        ctx_name = current.get("name", context or "")
        ctx = current.get("context") or {}
        user = ctx.get("user", "")
        default_ns = ctx.get("namespace") or default_ns
    pool = client.ApiClient(configuration).rest_client.pool_manager
    return Connection(
        host=configuration.host, context=ctx_name, user=user,
        namespace=namespace, pool=pool, configuration=configuration,
    )


def _in_cluster(kubeconfig: str | None, files: list[Path]) -> bool:
    return kubeconfig is None and not os.environ.get("KUBECONFIG") and bool(os.environ.get("KUBERNETES_SERVICE_HOST")) \
        and not files[0].exists()


def _chosen_context(kubeconfig: str | None, context: str | None, files: list[Path]) -> tuple[str, dict]:
    """The kubeconfig files joined as KUBECONFIG would join them, and the context chosen in them."""
    from kubernetes import config  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    try:
        missing = [p for p in files if not p.exists()]
    except OSError as exc:  # a KUBECONFIG entry the file system cannot even look up (a name too long)
        raise BackendError(f"kubeconfig {visible(exc.filename, 120)} cannot be read: {exc.strerror or exc}") from None
    if kubeconfig and missing:
        raise BackendError(f"kubeconfig {kubeconfig} does not exist")
    if len(missing) == len(files):  # KUBECONFIG names only files that are not there (kubectl skips missing ones)
        raise BackendError(f"kubeconfig {', '.join(visible(str(p), 200) for p in files)} "
                           f"{'does not exist' if len(files) == 1 else 'do not exist'} (KUBECONFIG)")
    for path in files:  # one line naming the file, never the client's TypeError on a file of the wrong shape
        problem = None if path in missing else kubeconfig_problem(path)
        if problem:
            raise BackendError(problem)
    joined = os.pathsep.join(str(p) for p in files)  # the client merges a KUBECONFIG-style list
    try:
        contexts, current = config.list_kube_config_contexts(joined)
    except ConfigException as exc:
        raise BackendError(_config_error(str(exc), context)) from None
    except Exception as exc:  # noqa: BLE001 - a shape kubeconfig_problem does not know: still the files it came from
        raise BackendError(f"kubeconfig {_names(joined)} is not valid: {one_line(exc)}") from None
    if context is not None:
        current = next((c for c in contexts if c.get("name") == context), None)
        if current is None:
            raise BackendError(f'context "{context}" is not in the kubeconfig')
    return joined, current or {}


KUBECONFIG_LISTS = ("clusters", "contexts", "users")


def kubeconfig_problem(path: Path) -> str | None:
    """What makes one kubeconfig file unusable, in one line that names it (None: the client may read it): not
    readable, not YAML (with the line), empty, not a mapping, or a list of clusters, contexts or users of the
    wrong shape. The client's own errors for these are Python's ("'str' object does not support item
    assignment") and name no file."""
    name = visible(str(path), 200)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return f"kubeconfig {name} is not UTF-8 text"
    except OSError as exc:
        return f"kubeconfig {name} cannot be read: {exc.strerror or one_line(exc)}"
    try:
        doc = load_text(text)
    except ValueError as exc:
        return f"kubeconfig {name}: {first_line(str(exc), 200)}"
    if doc is None:
        return f"kubeconfig {name} is empty"
    if not isinstance(doc, dict):
        return f"kubeconfig {name} is not a kubeconfig: a YAML {_yaml_kind(doc)}, not a mapping of clusters, " \
               "contexts and users"
    for key in KUBECONFIG_LISTS:
        entries, item = doc.get(key), key[:-1]
        if entries is None:
            continue
        if not isinstance(entries, list):
            return f"kubeconfig {name}: {key} is a {_yaml_kind(entries)}, not a list"
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                return f"kubeconfig {name}: {key}[{i}] has no name (each entry is name: and {item}:)"
            if entry.get(item) is not None and not isinstance(entry[item], dict):
                return (f"kubeconfig {name}: {key}[{i}] ({visible(entry['name'], 80)}): {item} is a "
                        f"{_yaml_kind(entry[item])}, not a mapping")
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        return f"kubeconfig {name}: current-context is a {_yaml_kind(current)}, not a name"
    return None


def _yaml_kind(value: object) -> str:
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def _loader_for(joined: str, context: str | None) -> Any:
    """The client's loader (with gputui's plugin runner) on the context: its cluster and user looked up, nothing
    run or sent yet."""
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)
    from kubernetes.config.kube_config import KubeConfigMerger  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    try:
        return loader_class()(config_dict=KubeConfigMerger(joined).config, active_context=context,
                               config_base_path=None)
    except ConfigException as exc:
        raise BackendError(_config_error(str(exc), context)) from None
    except Exception as exc:  # noqa: BLE001 - a shape kubeconfig_problem does not know: still the files it came from
        raise BackendError(f"kubeconfig {_names(joined)} is not valid: {one_line(exc)}") from None


def _names(joined: str) -> str:
    return ", ".join(visible(p, 200) for p in joined.split(os.pathsep) if p)


def _config_error(text: str, context: str | None) -> str:
    first = first_line(text) or "invalid kubeconfig"
    if context and "context" in first.lower():
        return f'context "{context}" is not in the kubeconfig'
    return f"kubeconfig: {first}"


def _quiet_library_logs() -> None:
    """The client and urllib3 log warnings (a connection pool full, a retry) to whatever handler the root
    logger has: on the terminal they are noise before gputui's own line, in the TUI they tear the screen.
    gputui words its own failures; --debug says what it does (gputui.base.debug_log)."""
    for name in ("urllib3", "kubernetes"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        logger.propagate = False
