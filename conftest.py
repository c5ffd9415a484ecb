"""pytest: the repository root is importable (train, data, model, ...) from tests/ and from test_smoke.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
