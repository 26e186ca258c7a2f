"""A drain's whole lifecycle, used alike by the TUI, the headless CLI and resume.

- `options`: what the operator chose, and how it is written on (and read back from) each node;
- `plan`: what would happen, pure: kubectl's filters, the three session states, batch capacity, lint;
- `lease`: which gputui owns a node's running drain;
- `events`: what a run tells its driver (board, stdout) and what the operator tells a run;
- `run`: one node, as a generator of events; `batch`: several, with parallelism and the capacity guard;
- `report`: how each node ended, and the exit code that says so.
"""
