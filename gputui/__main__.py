import sys

from gputui.cli import main

sys.exit(main())
