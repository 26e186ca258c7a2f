"""The words a snapshot is made of, as plain records and tables: nodes, GPUs, pods, services and sessions
(`model`, `sessions`), GPU metrics and resources, label selectors and the scheduler's facts, router kinds,
engine signals, and the facts `gputui check` reads. Imports only gputui.base."""
