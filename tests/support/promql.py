"""What the tests ask of any PromQL store (Prometheus, VictoriaMetrics): values by label and waiting for them.
One home for both servers; each supplies its own `query`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tests.support.procs import wait_for


class PromQLQueries:
    tag = ""  # short, for names a test makes once per store (namespaces, nodes)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def query_values(self, expr: str, by: Sequence[str] | str | None = None) -> dict[Any, float]:
        """Instant vector as {labels-key: float}. ``by`` picks label(s) for the key
        (a tuple when several); default: frozenset of all label items."""
        out: dict[Any, float] = {}
        for item in self.query(expr):
            m = item["metric"]
            if by is None:
                key: Any = frozenset(m.items())
            elif isinstance(by, str):
                key = m.get(by)
            else:
                key = tuple(m.get(b) for b in by)
            out[key] = float(item["value"][1])
        return out

    def wait_until(self, expr: str, predicate: Callable[[dict[Any, float]], bool] | None = None, *,
                   by: Sequence[str] | str | None = None, timeout: float = 20) -> dict[Any, float]:
        """Poll ``expr`` until ``predicate(query_values(expr, by))`` holds (default: non-empty)."""

        def check() -> dict[Any, float] | None:
            vals = self.query_values(expr, by)
            ok = predicate(vals) if predicate else bool(vals)
            return vals if ok else None

        return wait_for(check, timeout=timeout, interval=0.25, what=f"PromQL {expr!r}",
                        on_timeout=lambda: f"last: {self.query_values(expr, by)}")
