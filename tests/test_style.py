"""Style the README promises a forker: short functions in the project's modules, short lines everywhere.

ruff (pyproject.toml, run by .ci/run) checks the same line limit; this test needs no tool installed.
"""

import ast

import pytest

from conftest import REPO

MAX_FUNCTION_LINES = 80  # a function a reader takes in at once
MAX_LINE = 110  # pyproject.toml's [tool.ruff] line-length: side-by-side diffs stay readable
# The project's modules: *.py at the root, tests (test_smoke.py, conftest.py) excluded.
MODULES = [
    p
    for p in sorted(REPO.glob("*.py"))
    if not p.name.startswith("test_") and p.name != "conftest.py"
]
# Every .py of the repository (hidden folders such as .git or a .venv left out, and the vendored
# reference code under tests/reference: upstream's files unchanged, as pyproject's ruff exclusion).
ALL_PY = sorted(
    p
    for p in REPO.rglob("*.py")
    if not any(part.startswith(".") for part in p.relative_to(REPO).parts)
    and REPO / "tests" / "reference" not in p.parents
)


def long_functions(path, limit):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        f"{path.name}:{node.lineno} {node.name}() is {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > limit
    ]


def long_lines(path, limit):
    return [
        f"{path.relative_to(REPO)}:{i} is {len(line)} characters"
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > limit
    ]


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


def local_imports(path, names):
    """The project's modules `path` imports anywhere in it (functions and `__main__` blocks included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & names - {path.stem}


def import_circles(paths):
    """Every chain a -> b -> ... -> a of imports among `paths` (depth-first search, one chain per circle)."""
    names = {p.stem for p in paths}
    graph = {p.stem: sorted(local_imports(p, names)) for p in paths}
    circles, done = [], set()

    def visit(name, chain):
        if name in chain:
            circles.append(" -> ".join(chain[chain.index(name) :] + [name]))
            return
        if name in done:
            return
        for other in graph[name]:
            visit(other, chain + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return circles


def test_no_import_circle_among_the_modules():
    """A forker reads the modules bottom-up: no module imports one that imports it back, not even inside a
    function or a `__main__` block."""
    assert {"train", "checkpoint", "rundir", "errors"} <= {p.stem for p in MODULES}
    assert not import_circles(MODULES), import_circles(MODULES)


def test_an_import_circle_is_found(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from c import g\n")
    (tmp_path / "c.py").write_text("if __name__ == '__main__':\n    import a\n")
    (tmp_path / "d.py").write_text("import a\nimport os\n")
    assert import_circles(sorted(tmp_path.glob("*.py"))) == ["a -> b -> c -> a"]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_conditional_expression_stands_as_a_statement(path):
    # `f() if c else None` or `c and f()` as a statement hides an `if` to save lines: write the `if`.
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.IfExp, ast.BoolOp))
    ]
    assert not found, found
