"""Hypothesis runs derandomized by default, so the suite CI runs is the same suite every time: a random example
that fails once and passes the next run makes CI a coin toss. Explore with fresh randomness by hand:
HYPOTHESIS_PROFILE=explore pytest tests/unit/test_fuzz_loaders.py; add anything it finds as an @example."""

from __future__ import annotations

import os
import time

from hypothesis import settings

# The suite runs in UTC whatever the machine's zone: the drain board prints deadlines as wall-clock
# times, and its snapshot SVGs were drawn in UTC (under TZ=Asia/Tokyo twelve of them failed). This
# conftest is loaded before any test module is imported, and subprocesses (the tmux and browser
# tests' gputui, the integration servers) inherit the variable.
os.environ["TZ"] = "UTC"
time.tzset()

settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
