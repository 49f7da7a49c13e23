"""``python -m kafkapy``: the ``kafkapy`` command, for environments where its script is not on PATH."""

import sys

from kafkapy.cli import main

if __name__ == "__main__":
    sys.exit(main())
