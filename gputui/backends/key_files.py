"""Client keys and certificates given as data (client-key-data, a plugin's clientKeyData, and the CA),
handed to ssl, which reads paths only, as files in memory (`memory_file`: a memfd, gone with the process
however it ends). The official client would write them to $TMPDIR and remove them at a normal exit only, so
a dropped SSH session (SIGHUP) left the key behind."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

_files_lock = threading.Lock()
_memory_files: dict[bytes, str] = {}  # content -> its path (the same key twice is one file)
_private_dir: str | None = None  # where memfd is unavailable: a 0700 directory removed at exit and on signals


def memory_file(content: bytes | str) -> str:
    """A path whose file holds `content` for as long as this process lives, for ssl's load_cert_chain and
    load_verify_locations, which read paths only. On Linux a memfd (/proc/self/fd/N): never on a disk, gone
    however the process ends, SIGKILL included, and not inherited by children. Elsewhere a 0600 file in a
    0700 private directory that `remove_private_files` removes (at exit, and on SIGHUP and SIGTERM through
    gputui.cli.main)."""
    data = content.encode() if isinstance(content, str) else bytes(content)
    with _files_lock:
        path = _memory_files.get(data)
        if path is None:
            path = _memfd(data) or _private_file(data)
            _memory_files[data] = path
        return path


def _memfd(data: bytes) -> str | None:
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        fd = create("gputui-credential", os.MFD_CLOEXEC)
    except OSError:
        return None
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    path = f"/proc/self/fd/{fd}"
    if not os.path.exists(path):  # no /proc mounted
        os.close(fd)
        return None
    return path


def _private_file(data: bytes) -> str:
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="gputui-")  # 0700
        atexit.register(remove_private_files)
    fd, path = tempfile.mkstemp(dir=_private_dir)  # 0600
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def remove_private_files() -> None:
    """Remove the private directory of key files, if memfd was unavailable and one was made."""
    global _private_dir
    if _private_dir is not None:
        shutil.rmtree(_private_dir, ignore_errors=True)
        _private_dir = None


def keep_key_files_in_memory() -> None:
    """Every key, certificate and CA the client would write to a temporary file (client-key-data,
    client-certificate-data, certificate-authority-data, an OIDC provider's CA) goes to `memory_file`
    instead: the client writes them to $TMPDIR and removes them at a normal exit only."""
    from kubernetes.config import kube_config  # noqa: PLC0415 (the kubernetes client, ~250 ms: only once a kubeconfig is read)

    def in_memory(content: bytes | str, temp_file_path: str | None = None, force_recreate: bool = False) -> str:
        return memory_file(content)

    kube_config._create_temp_file_with_content = in_memory
