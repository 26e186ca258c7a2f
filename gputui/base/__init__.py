"""What every layer may use and that knows nothing of clusters: errors, paths, text made safe for a terminal,
YAML files, the checks of what a user types, the debug log, fast frozen records, and what moved between two
reads. Imports nothing else of gputui."""
