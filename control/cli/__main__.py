"""``python -m control.cli``: how ``hookyard up`` starts its children (and the tests run the command)."""

import sys

from control.cli.entry import main

if __name__ == "__main__":  # not when imported (a walk over every module)
    sys.exit(main())
