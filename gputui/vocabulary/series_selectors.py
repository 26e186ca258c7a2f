"""What a PromQL series selector from the config may look like: the vocabulary both the settings (which check
the config's session_metrics) and the metrics backend (which reads the series) use, so neither imports the
other's layer."""

from __future__ import annotations

import re

# A PromQL series selector as the config may give one: a metric name and optional plain label matchers.
SELECTOR = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*(\{\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"[^"\\]*"'
                      r'(\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"[^"\\]*")*\s*\})?')


def check_selector(text: str) -> str:
    """The selector, or ValueError with why (one line)."""
    if not isinstance(text, str) or not SELECTOR.fullmatch(text.strip()):
        raise ValueError(f"{text!r} is not a series selector (metric_name or metric_name{{label=\"value\"}})")
    return text.strip()
