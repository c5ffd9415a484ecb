"""Style the README promises a forker: short functions in the project's modules, short lines
everywhere.

ruff (pyproject.toml, run by .ci/run) checks the same line limit; this test needs no tool installed.
"""

import ast
import io
import re
import tokenize

import pytest

from conftest import REPO

MAX_FUNCTION_LINES = 80  # a function a reader takes in at once
# pyproject.toml's [tool.ruff] line-length, prose included: side-by-side diffs stay readable
MAX_LINE = 100
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


def test_lines_are_at_most_100_characters():
    too_long = [msg for path in ALL_PY for msg in long_lines(path, MAX_LINE)]
    assert not too_long, "\n".join(too_long)


def local_imports(path, names):
    """The project's modules `path` imports anywhere in it (functions and `__main__` blocks
    included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & names - {path.stem}


def import_circles(paths):
    """Every chain a -> b -> ... -> a of imports among `paths` (depth-first search, one chain per
    circle)."""
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
    """A forker reads the modules bottom-up: no module imports one that imports it back, not even
    inside a function or a `__main__` block."""
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
    # `f() if c else None` or `c and f()` as a statement hides an `if` to save lines: write the
    # `if`.
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.IfExp, ast.BoolOp))
    ]
    assert not found, found


def logical_lines(path):
    """(first line, last line, end-of-line comments) of each statement the formatter spread over
    several lines, from the tokens (comments are not in the AST)."""
    out, start, comments = [], None, []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.COMMENT:
            if start is not None:
                comments.append(tok)
        elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if start is not None and tok.start[0] > start:
                out.append((start, tok.start[0], comments))
            start, comments = None, []
        elif start is None:
            start = tok.start[0]
    return out


def one_line(lines):
    """The statement joined on one line as the formatter would (no comments, no trailing comma)."""
    text = " ".join(line.strip() for line in lines)
    text = re.sub(r"([(\[{]) ", r"\1", text)
    return re.sub(r",? ([)\]}])", r"\1", text)


def formatter_leftovers(path):
    """Comments that made `ruff format` wrap a statement: a comment alone on a closing bracket
    (`)  # why`), or the one comment of a statement that fits on one line without it. A comment
    goes on its own line above the statement; the statement then joins again."""
    lines, found = path.read_text(encoding="utf-8").splitlines(), []
    for first, last, comments in logical_lines(path):
        for c in comments:
            if re.fullmatch(r"\s*[)\]}]+[:,]?\s*", lines[c.start[0] - 1][: c.start[1]]):
                found.append(f"{path.name}:{c.start[0]}: a comment on a closing bracket")
        if len(comments) == 1 and "fmt:" not in comments[0].string:
            c = comments[0]
            stmt = lines[first - 1 : last]
            stmt[c.start[0] - first] = stmt[c.start[0] - first][: c.start[1]]
            indent = len(stmt[0]) - len(stmt[0].lstrip())
            if indent + len(one_line(stmt)) <= MAX_LINE:
                found.append(f"{path.name}:{first}: wrapped to keep its comment")
    return found


@pytest.mark.parametrize("path", ALL_PY, ids=lambda p: str(p.relative_to(REPO)))
def test_no_comment_made_the_formatter_wrap_a_statement(path):
    assert not formatter_leftovers(path), "\n".join(formatter_leftovers(path))


def test_formatter_leftovers_are_found(tmp_path):
    leftovers = (
        "x = f(\n    1, 2\n)  # why\n"
        "flag: bool = (\n    False  # why\n)\n"
        "for (\n    a,\n    b,\n) in pairs():  # why\n    pass\n"
    )
    clean = "# why\nx = f(1, 2)\nitems = {\n    'a': 1,  # one\n    'b': 2,  # two\n}\n"
    (tmp_path / "bad.py").write_text(leftovers)
    (tmp_path / "good.py").write_text(clean)
    found = formatter_leftovers(tmp_path / "bad.py")
    assert [f.split(":")[1] for f in found] == ["3", "1", "4", "7"], found
    assert not formatter_leftovers(tmp_path / "good.py")


def skips(ifexp):
    """A conditional expression with an empty branch (`xs if c else []`): a loop over it is an
    `if` in hiding."""
    empty = (ast.Tuple, ast.List, ast.Dict, ast.Set)
    branches = (ifexp.body, ifexp.orelse)
    nested = [skips(e) for e in branches if isinstance(e, ast.IfExp)]
    return any(
        isinstance(e, empty) and not getattr(e, "elts", getattr(e, "keys", None)) for e in branches
    ) or any(nested)


def hidden_conditionals(path):
    """`for m in xs if c else []` and `"text" * (n == 1)`: an `if` hidden in an expression."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        loop = isinstance(node, (ast.For, ast.comprehension))
        if loop and isinstance(node.iter, ast.IfExp) and skips(node.iter):
            found.append(f"{path.name}:{node.iter.lineno}: a loop skipped by a conditional")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            if any(isinstance(s, ast.Compare) for s in (node.left, node.right)):
                found.append(f"{path.name}:{node.lineno}: a text repeated by a condition")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_conditional_hides_in_an_expression(path):
    assert not hidden_conditionals(path), hidden_conditionals(path)


def test_hidden_conditionals_are_found(tmp_path):
    hidden = "for m in xs if c else []:\n    pass\ns = 'saved' * (n == 1)\n"
    chosen = "for m in xs if c else ys:\n    pass\nn = 3 * (t or 1)\n"
    (tmp_path / "hidden.py").write_text(hidden)
    (tmp_path / "chosen.py").write_text(chosen)
    assert [f.split(":")[1] for f in hidden_conditionals(tmp_path / "hidden.py")] == ["1", "3"]
    assert not hidden_conditionals(tmp_path / "chosen.py")


# ---- flag spelling -------------------------------------------------------------------------------
# The rule: a new flag is spelled with dashes (--label-smoothing, dest label_smoothing), as
# torchvision's references, timm and VideoMAE spell theirs. The original project's flags (its
# README's command: --t_length, --lr_steps, ...) and those that joined them before the rule keep
# their underscores, so its commands and recipes run verbatim. This list only shrinks.
UNDERSCORE_FLAGS = frozenset(
    "--augment_device --bn_bias_wd --class_names --crop_size --data_root --decode_device --fc_only "
    "--freeze_bn --image_tmpl --iter_size --lr_policy --lr_steps --max_bad_videos --new_size "
    "--no_flip --num_classes --num_sample --num_segments --output_root --pretrained_model "
    "--read_timeout --run_name --save_scores --t_length --t_stride --test_clips --test_crops "
    "--test_sampling --train_crop --train_sampling --video_decoder".split()
)


def misspelled_flags(parser):
    """The long flags of `parser` spelled with an underscore that UNDERSCORE_FLAGS does not keep."""
    spelled = (o for a in parser.actions for o in a.option_strings if o.startswith("--"))
    return sorted(o for o in spelled if "_" in o and o not in UNDERSCORE_FLAGS)


def test_new_flags_are_spelled_with_dashes():
    import flags

    assert misspelled_flags(flags.get_args_parser()) == [], (
        "new flags use dashes (--my-flag, dest=my_flag); see UNDERSCORE_FLAGS"
    )


def test_a_flag_spelled_with_an_underscore_is_found():
    import flags

    parser = flags.get_args_parser()
    parser.add_argument("--focal_gamma", type=float)
    parser.add_argument("--focal-alpha", dest="focal_alpha", type=float)
    assert misspelled_flags(parser) == ["--focal_gamma"]
