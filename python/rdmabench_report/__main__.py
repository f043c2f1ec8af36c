"""Allows `python -m rdmabench_report`, same as the rdmabench-report script."""

import sys

from .cli import main

sys.exit(main())
