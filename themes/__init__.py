"""Bundled themes (YAML), shipped inside the wheel as gputui.themes."""
