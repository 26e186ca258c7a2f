"""What operators do: each operation is a pure plan, then a run through a writer."""
