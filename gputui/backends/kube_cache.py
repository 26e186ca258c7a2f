"""List-then-watch caches: one thread per resource, raw JSON, compact records.

Each cache lists (paged), then watches from the list's resourceVersion with
bookmarks; a 410 Gone relists; a broken connection retries with capped,
jittered backoff. Readers take a consistent copy of the records at any time.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext, suppress
from typing import Any

from gputui.backends.base import BackendError
from gputui.backends.gcpause import gc_paused
from gputui.backends.kube_errors import ApiError
from gputui.backends.kube_http import Connection
from gputui.base.debug_log import log

PAGE_SIZE = 500
WATCH_TIMEOUT_S = 240  # the server ends the watch; we re-watch from the last version
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 5.0  # a dashboard must come back quickly once the apiserver does

Transform = Callable[[dict[str, Any]], Any]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class ListWatchCache:
    def __init__(
        self,
        conn: Connection,
        path: str,
        transform: Transform,
        *,
        label_selector: str | None = None,
        on_change: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.conn = conn
        self.path = path
        self.transform = transform
        self.label_selector = label_selector
        self.on_change = on_change or (lambda: None)
        self.clock = clock
        self._items: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._rv: str | None = None
        self._resp: Any = None  # the open watch response, for stop()
        self.synced = threading.Event()
        self.connected = False
        self.error: str | None = None
        self.last_ok: float | None = None
        self.generation = 0  # bumps on every change, so readers can skip unchanged work
        self._view: tuple[Any, ...] = ()
        self._view_generation = 0
        self.lists = 0  # how many full lists (1 + relists): visible in tests and benchmarks
        # Pages answered so far (every list): a first list of 65,000 nodes takes a minute and more, page by
        # page; waiting for it is judged by whether pages still come, not by the whole list's time.
        self.pages = 0
        # The first list while it runs: objects read so far and the apiserver's estimate of the rest (its
        # remainingItemCount; None when it gives none). What start-up shows instead of an empty screen.
        self._listed = 0
        self._remaining: int | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)

    # ----- public ---------------------------------------------------------------------

    def start(self) -> ListWatchCache:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends the watch now (not at its timeout) and drops the records: a closed reader frees its memory."""
        self._stop.set()
        resp, self._resp = self._resp, None
        if resp is not None:
            with suppress(OSError, ValueError, RuntimeError):  # already finished or released
                resp.shutdown()  # unblocks the thread's read; it sees _stop and returns
        with self._lock:
            self._items = {}
            self.generation += 1

    def items(self) -> tuple[Any, ...]:
        """Every record; the same tuple until something changes, so a reader can tell "unchanged"
        by identity (at 10,000 nodes a quiet refresh then costs next to nothing)."""
        with self._lock:
            if self._view_generation != self.generation:
                self._view, self._view_generation = tuple(self._items.values()), self.generation
            return self._view

    def get(self, keys: Iterable[str]) -> list[Any]:
        """The records under these keys ("namespace/name"), skipping those the cache does not hold."""
        with self._lock:
            return [self._items[k] for k in keys if k in self._items]

    def progress(self) -> tuple[int, int | None] | None:
        """(objects read, estimated total or None) while the first list runs; None once it is done."""
        if self.synced.is_set():
            return None
        listed, remaining = self._listed, self._remaining
        return listed, None if remaining is None else listed + remaining

    # ----- the loop -------------------------------------------------------------------

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            try:
                if self._rv is None:
                    self._list()
                self._watch()
                backoff = BACKOFF_MIN_S
            except ApiError as exc:
                if exc.status == 410:  # our resourceVersion is too old: start over
                    log.debug("watch %s: resourceVersion too old (410 Gone): listing again", self.path)
                    self._rv = None
                    continue
                self._failed(str(exc))
            except BackendError as exc:
                self._failed(str(exc))
            except Exception as exc:  # noqa: BLE001 - never let a cache thread die silently
                self._failed(f"{type(exc).__name__}: {exc}")
            else:
                continue
            self._stop.wait(backoff * (0.5 + random.random()))
            backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _failed(self, message: str) -> None:
        log.debug("watch %s: %s", self.path, message)
        self.connected = False
        self.error = message

    def _ok(self) -> None:
        self.connected = True
        self.error = None
        self.last_ok = self.clock()

    def _list(self) -> None:
        started, pages = time.monotonic(), self.pages
        fresh: dict[str, Any] = {}
        cont: str | None = None
        # The first list fills the records page by page, so a start-up on a large cluster can draw what came so
        # far (a partial view, marked so: KubeReader.partial_snapshot). A relist keeps the whole last list until
        # the new one is complete: once synced, readers never see a part.
        first = not self.synced.is_set()
        if first:
            with self._lock:
                self._items = fresh
                self.generation += 1
        while True:
            body = self.conn.request(
                "GET", self.path,
                {"limit": PAGE_SIZE, "continue": cont, "labelSelector": self.label_selector},
                timeout=30.0,
            )
            with gc_paused(), self._lock if first else nullcontext():
                for obj in body.get("items") or []:
                    fresh[object_key(obj)] = self.transform(obj)
                if first:
                    self.generation += 1
            self.pages += 1
            meta = body.get("metadata") or {}
            remaining = meta.get("remainingItemCount")
            self._listed, self._remaining = len(fresh), remaining if isinstance(remaining, int) else None
            cont = meta.get("continue")
            if not cont:
                self._rv = meta.get("resourceVersion")
                break
        if self._stop.is_set():
            return  # stopped while listing: keep nothing
        with self._lock:
            self._items = fresh
            self.generation += 1
        self.lists += 1
        log.debug("watch %s: listed %d objects in %d pages, %.1f s", self.path, len(fresh), self.pages - pages,
                  time.monotonic() - started)
        self._ok()
        self.synced.set()
        self.on_change()

    def _opened(self, resp: Any) -> None:
        self._resp = resp
        if self._stop.is_set():  # stop() came between the request and now
            self.stop()

    def _watch(self) -> None:
        query = {
            "watch": "1",
            "resourceVersion": self._rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": WATCH_TIMEOUT_S,
            "labelSelector": self.label_selector,
        }
        for event in self.conn.stream(self.path, query, timeout=WATCH_TIMEOUT_S + 30, on_open=self._ok,
                                      on_response=self._opened):
            if self._stop.is_set():
                return
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                raise ApiError(int(code or 500), obj.get("message", "watch error"), obj)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self._rv = rv
            self._ok()
            if kind == "BOOKMARK":
                continue
            key = object_key(obj)
            with self._lock:
                if self._stop.is_set():
                    return
                if kind == "DELETED":
                    self._items.pop(key, None)
                else:
                    record = self.transform(obj)
                    if self._items.get(key) == record:
                        # Nothing a record keeps moved: a kubelet's status report (every node, every 5 minutes:
                        # 17 a second at 5,000 nodes), a heartbeat time, a managed field. Readers keep the same
                        # tuple, so the snapshot, the join and every view built on it are not redone for it.
                        continue
                    self._items[key] = record
                self.generation += 1
            self.on_change()
        self._resp = None
        self._ok()  # the server closed a healthy watch; re-watch from _rv
