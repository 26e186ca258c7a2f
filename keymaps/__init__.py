"""Bundled keymaps (YAML), shipped inside the wheel as gputui.keymaps."""
