"""tests/test_exact.py's checks (resume at an epoch boundary, SIGTERM mid-epoch then resume, DDP
evaluation vs one process) over a two-head list: `<frame_dir> <num_frames> <verb>,<noun>` lines and
`--heads 50 51` (101 outputs, as ucf101's head in those tests). --trainer-flags adds to them:

    RUN_SLOW=1 python -m pytest -q tests/test_exact_heads.py
"""

import shlex
from pathlib import Path

import pytest

import prepare
from test_exact import (  # noqa: F401  (collected here, with this module's fixtures)
    test_ddp_trains_and_evaluates_exactly,
    test_resume_is_exact,
    test_sigterm_saves_and_resumes_exactly,
)

pytestmark = pytest.mark.slow
HEADS = ["--heads", "50", "51"]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """conftest's tiny_data (12 train videos, an odd val list of 7) with two labels a line: synth
    class c is verb c % 2 and noun c % 3."""
    out = tmp_path_factory.mktemp("tiny_heads")
    train_list, val_list = prepare.make_synth(out, classes=4, videos=12, frames=10, size=(48, 40))
    for path, keep in ((Path(train_list), None), (Path(val_list), 7)):
        rows = [line.rsplit(maxsplit=1) for line in path.read_text().splitlines()[:keep]]
        lines = [f"{head} {int(c) % 2},{int(c) % 3}" for head, c in rows]
        path.write_text("\n".join(lines) + "\n")
    return str(train_list), str(val_list)


@pytest.fixture
def trainer_flags(request):
    return [*HEADS, *shlex.split(request.config.getoption("--trainer-flags"))]
