"""`gputui check`: the seeds' validation checklists, each a rule over one snapshot (rules), with a result
that is pass, warn, fail or unknown, never a silent pass (result), printed as text, JSON or JUnit (output)."""
