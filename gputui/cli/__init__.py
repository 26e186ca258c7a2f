"""The command line: `main` parses and dispatches; one module per subcommand (nodes, drain, shift) and the TUI
launcher; `common` holds the exit codes and the one error line every subcommand uses."""

from gputui.cli.main import main

__all__ = ["main"]
