"""Style the README promises a forker: short functions in the project's modules, short lines everywhere.

ruff (pyproject.toml, run by .ci/run) checks the same line limit; this test needs no tool installed.
"""
import ast

import pytest

from conftest import REPO

MAX_FUNCTION_LINES = 80   # a function a reader takes in at once
MAX_LINE = 110            # pyproject.toml's [tool.ruff] line-length: side-by-side diffs stay readable
# The project's modules: *.py at the root, tests (test_smoke.py, conftest.py) excluded.
MODULES = [p for p in sorted(REPO.glob("*.py")) if not p.name.startswith("test_") and p.name != "conftest.py"]
# Every .py of the repository (hidden folders such as .git or a .venv left out).
ALL_PY = sorted(p for p in REPO.rglob("*.py")
                if not any(part.startswith(".") for part in p.relative_to(REPO).parts))


def long_functions(path, limit):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [f"{path.name}:{node.lineno} {node.name}() is {node.end_lineno - node.lineno + 1} lines"
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def long_lines(path, limit):
    return [f"{path.relative_to(REPO)}:{i} is {len(line)} characters"
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > limit]


def test_the_modules_are_found():
    assert {"train.py", "data.py", "model.py"} <= {p.name for p in MODULES}
    assert not any(p.name.startswith("test_") for p in MODULES)
    assert REPO / "tests" / "test_style.py" in ALL_PY


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_functions_are_at_most_80_lines(path):
    assert not long_functions(path, MAX_FUNCTION_LINES), long_functions(path, MAX_FUNCTION_LINES)


def test_lines_are_at_most_110_characters():
    too_long = [msg for path in ALL_PY for msg in long_lines(path, MAX_LINE)]
    assert not too_long, "\n".join(too_long)
