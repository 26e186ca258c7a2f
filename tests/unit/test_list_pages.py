"""ListWatchCache's list, page by page, on a recording connection: the first list shows what came so far (the
partial view start-up draws on a large cluster), a relist never does (once synced, a reader sees whole lists
only), and progress counts the pages read against the apiserver's estimate of the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputui.backends.kube_cache import ListWatchCache


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


class Pages:
    """Answers each GET with the next page; `between` runs before each page after the first (what a reader sees
    while the list is still coming)."""

    def __init__(self, pages: list[list[str]], between: Callable[[int], None]) -> None:
        self.pages, self.between, self.asked = pages, between, 0

    def request(self, method: str, path: str, query: dict[str, Any], timeout: float) -> dict[str, Any]:
        i = self.asked
        self.asked += 1
        if i:
            self.between(i)
        last = i == len(self.pages) - 1
        rest = sum(len(p) for p in self.pages[i + 1:])
        meta = {"resourceVersion": "7"} if last else {"continue": f"c{i}", "remainingItemCount": rest}
        return {"items": [node(n) for n in self.pages[i]], "metadata": meta}


def names(cache: ListWatchCache) -> list[str]:
    return sorted(cache.items())


def test_the_first_list_shows_each_page_as_it_comes_and_counts_the_rest():
    seen: list[tuple[list[str], tuple[int, int | None] | None]] = []
    cache = ListWatchCache(None, "/api/v1/nodes", lambda o: o["metadata"]["name"])  # type: ignore[arg-type]
    cache.conn = Pages([["a", "b"], ["c"], ["d", "e"]], lambda i: seen.append((names(cache), cache.progress())))
    cache._list()
    assert seen == [(["a", "b"], (2, 5)), (["a", "b", "c"], (3, 5))]
    assert names(cache) == ["a", "b", "c", "d", "e"] and cache.synced.is_set() and cache.progress() is None
    assert cache.lists == 1 and cache.pages == 3


def test_a_relist_keeps_the_whole_last_list_until_the_new_one_is_complete():
    """After a 410 the cache lists again: a reader meanwhile sees the last whole list, never a part of the new
    one (a fleet of 65,000 nodes shown as 500 would read as 64,500 nodes gone)."""
    cache = ListWatchCache(None, "/api/v1/nodes", lambda o: o["metadata"]["name"])  # type: ignore[arg-type]
    cache.conn = Pages([["a", "b", "c"]], lambda i: None)
    cache._list()
    seen: list[list[str]] = []
    cache.conn = Pages([["x"], ["y"], ["a"]], lambda i: seen.append(names(cache)))
    cache._list()
    assert seen == [["a", "b", "c"], ["a", "b", "c"]]
    assert names(cache) == ["a", "x", "y"] and cache.lists == 2 and cache.progress() is None
