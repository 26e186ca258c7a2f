"""Where snapshots come from and where writes go."""
