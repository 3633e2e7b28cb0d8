"""``python -m pipeline [run|generate|stream|batch] ...`` (see pipeline/runner.py)."""
import sys

from pipeline.runner import main

sys.exit(main())
