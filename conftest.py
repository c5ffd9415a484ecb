"""pytest: the repository root is importable (train, data, model, ...) from tests/ and from
test_smoke.py, and the tests' shared constants, helpers and fixtures live here, once.

Constants and helpers: `from conftest import TINY, run_main, run_cli, ...`. Fixtures (lists,
tiny_data, synth) need no import. `--trainer-flags="--your_flag 3"` appends flags to every trainer
command of tests/test_exact.py (the `trainer_flags` fixture).
"""

from pathlib import Path
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

import data  # noqa: E402
import flags  # noqa: E402
import model  # noqa: E402
import prepare  # noqa: E402
import train  # noqa: E402

REPO = Path(__file__).resolve().parent
# the real lists; tests that read them skip without
UCF101_LISTS = REPO.parent / "shared" / "data" / "ucf101"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
# A tiny recipe: 4 frames, 32 px crops, the 4-block resnet10_3d; -b 4 on 8 train videos is two
# optimizer steps per epoch (a second or two on CPU).
TINY = [
    "--arch",
    "resnet10_3d",
    "--t_length",
    "4",
    "--t_stride",
    "2",
    "--new_size",
    "36",
    "--crop_size",
    "32",
    "-b",
    "4",
    "--lr",
    "0.01",
    "--lr_steps",
    "2",
    "--dro",
    "0",
    "-j",
    "0",
    "-p",
    "1",
    "-ef",
    "1",
    "--device",
    "cpu",
]
W, H = 48, 40  # synth's frame size; short side 40
NUM_FRAMES = 10  # frames per synth video
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def pytest_addoption(parser):
    parser.addoption(
        "--trainer-flags",
        default="",
        metavar="FLAGS",
        help="extra train.py flags for the exactness tests (tests/test_exact.py), "
        'e.g. --trainer-flags="--your_flag 3"',
    )


# The test tiers. `python -m pytest -q` (the README's test command) runs the fast tier: every module
# touched in a few minutes on 2 CPU cores. Tests marked `@pytest.mark.slow` (a module: `pytestmark =
# pytest.mark.slow`) are the long ones: exactness under signals, DDP and torchrun, full-width parity
# models, the walkthrough. RUN_SLOW=1 runs them too (`.ci/run` does), as transformers' RUN_SLOW.
RUN_SLOW = os.environ.get("RUN_SLOW", "") not in ("", "0")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the slow tier; runs only with RUN_SLOW=1")


def pytest_collection_modifyitems(config, items):
    """Deselects the slow tier unless RUN_SLOW=1: the summary says how many were left out.
    `--trainer-flags` asks for the exactness tests, which are all slow: given, it keeps them."""
    if RUN_SLOW or config.getoption("--trainer-flags"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture(scope="session")
def trainer_flags(request):
    """The --trainer-flags option split like a shell line: appended to every trainer command of
    test_exact."""
    return shlex.split(request.config.getoption("--trainer-flags"))


# ---- running train.py ----------------------------------------------------------------------------
def run_main(argv):
    """train.main in this process (pretrain.main for --pretrain, as `python train.py` hands it
    over)."""
    args = train.parse_args(argv)
    if args.pretrain:
        import pretrain  # a test-side import: train.py itself never imports pretrain.py

        return pretrain.main(args)
    return train.main(args)


def run_cli(argv, timeout=240, **kw):
    """python train.py ARGV in a subprocess (one thread, unbuffered) with a timeout:
    CompletedProcess."""
    return subprocess.run(
        [sys.executable, str(REPO / "train.py"), *argv],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=timeout,
        **kw,
    )


def run_dir(root, argv):
    """The run folder train.py makes under root for argv."""
    return Path(root) / flags.run_dir_name(train.parse_args(argv))


def logs(folder):
    """A run folder's log.jsonl, one dict per epoch."""
    return [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]


def weights(path):
    """A checkpoint's model state_dict."""
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def assert_same_weights(a, b):
    """Two state_dicts equal bit for bit."""
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def acc_line(text):
    """(top1, top5) from train.py's ` * Acc@1 .. Acc@5 ..` line; the numbers of its ` * mAP ..` or
    ` * action_acc1 .. verb_acc1 ..` line (--multi-label, --heads)."""
    m = re.search(r"^ \* Acc@1 ([\d.]+) Acc@5 ([\d.]+)$", text, re.M)
    if m is None:
        m = re.search(r"^ \* ((?:[a-zA-Z]\w* [\d.]+ ?)+)$", text, re.M)
        assert m, text
        return tuple(float(v) for v in m.group(1).split()[1::2])
    return float(m.group(1)), float(m.group(2))


def one_line_error(capsys_or_text, *needles, code=2, exc=None):
    """The error is one line, no traceback, naming each needle (and exiting with code, given
    exc)."""
    if exc is not None:
        assert exc.value.code == code
    err = capsys_or_text if isinstance(capsys_or_text, str) else capsys_or_text.readouterr().err
    err = err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


CKPT_ARGS = dict(
    arch="resnet10_3d",
    num_classes=4,
    t_length=4,
    t_stride=2,
    new_size=48,
    crop_size=40,
    image_tmpl="img_{:05d}.jpg",
    mean=data.MEAN,
    std=data.STD,
    test_clips=1,
    test_crops=1,
)


def tiny_checkpoint(path, class_names=None, **override):
    """A checkpoint as train.py writes it (what predict, features and export read): a random tiny
    arch."""
    torch.manual_seed(0)
    args = dict(CKPT_ARGS, **override)
    net = model.build_network(  # a ViT's position table is built for its clips
        args["arch"],
        args["num_classes"],
        t_length=args["t_length"],
        crop_size=args["crop_size"],
        slowfast_variant=args.get("slowfast_variant"),
    )
    torch.save(
        {
            "model": net.state_dict(),
            "args": args,
            "class_names": class_names,
            "epoch": 1,
            "iter": 0,
            "optimizer": {},
            "scaler": {},
            "rng": [],
            "best_score": 0.0,
            "best_epoch": 0,
        },
        path,
    )
    return str(path)


# ---- data on disk --------------------------------------------------------------------------------
def copy_lists(lists, tmp_path):
    """A copy of the `lists` fixture's data to spoil, in tmp_path/data: (folder, its first train
    video)."""
    folder = tmp_path / "data"
    shutil.copytree(Path(lists[0]).parent, folder)
    return folder, (folder / "train.txt").read_text().split()[0]


def spoil_frames(folder, video):
    """Frames 2..9 of `video` undecodable; 1 and 10 stay fine: the early folder check passes, the
    clip does not."""
    for k in range(2, 10):
        (folder / video / f"img_{k:05d}.jpg").write_bytes(b"garbage")


def write_list(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_frames(folder, n, size=(16, 12), start=1, tmpl="img_{:05d}.jpg", seed=0):
    """n small random JPEG frames start .. start+n-1 in folder."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(start, start + n):
        frame = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        Image.fromarray(frame).save(folder / tmpl.format(i))
    return folder


def copy_video(src, dst, count=NUM_FRAMES, tmpl="img_{:05d}.jpg", dst_start=1):
    """Copy a synth video's first `count` frames into a new folder, renamed by tmpl from
    dst_start."""
    dst.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        (dst / tmpl.format(dst_start + k)).write_bytes((src / f"img_{1 + k:05d}.jpg").read_bytes())
    return dst


def fake_ucf101(tmp_path):
    """A tiny UCF101: official split files for 3 classes, frame folders counted by the test."""
    frames, splits = tmp_path / "ucf" / "RGB", tmp_path / "ucf_splits"
    splits.mkdir()
    write_list(splits / "classInd.txt", ["1 ApplyEyeMakeup", "2 Biking", "3 HandstandPushups", ""])
    write_list(
        splits / "trainlist01.txt",
        [
            "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1",
            "HandStandPushups/v_HandStandPushups_g08_c01.avi "
            "3",  # UCF101 spells this class two ways
            "Biking/v_Biking_g08_c01.avi 2",
            "Biking/v_Biking_g09_c01.avi 2",  # no frames: warned about, left out
        ],
    )
    write_list(
        splits / "testlist01.txt",
        ["ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi", "Biking/v_Biking_g01_c01.avi"],
    )
    # another split: ignored
    write_list(splits / "trainlist02.txt", ["Biking/v_Biking_g01_c01.avi 2"])
    write_frames(frames / "v_ApplyEyeMakeup_g08_c01", 3)
    # per-class layout works too
    write_frames(frames / "HandstandPushups" / "v_HandStandPushups_g08_c01", 5)
    write_frames(frames / "v_Biking_g08_c01", 4)
    write_frames(frames / "v_ApplyEyeMakeup_g01_c01", 6)
    write_frames(frames / "v_Biking_g01_c01", 2)
    write_frames(frames / "v_Biking_g01_c01", 1, start=4)  # a gap after frame 2: 2 usable frames
    return frames, splits


def fake_hmdb51(tmp_path):
    """A tiny HMDB51: '<class>_test_split1.txt' files ('<video>.avi <0|1|2>', trailing spaces as in
    the real ones) for 3 classes, one flat folder of frame folders."""
    frames, splits = tmp_path / "hmdb" / "frames", tmp_path / "hmdb_splits"
    splits.mkdir()
    # class names sort brush_hair < sword < sword_exercise, but their FILES sort
    # sword_exercise_test_split1.txt < sword_test_split1.txt: labels must follow the class names
    write_list(
        splits / "brush_hair_test_split1.txt",
        ["Brushing_hair_1.avi 1 ", "Brushing_hair_2.avi 2 ", "Brushing_hair_3.avi 0 "],
    )
    write_list(splits / "sword_test_split1.txt", ["#20_sword_fight.avi 1 ", "sword_2.avi 2 "])
    write_list(splits / "sword_exercise_test_split1.txt", ["sword_ex_1.avi 2 ", ""])
    write_list(splits / "sword_test_split2.txt", ["other_split.avi 1 "])
    for name, n in [
        ("Brushing_hair_1", 4),
        ("Brushing_hair_2", 3),
        ("Brushing_hair_3", 5),
        ("#20_sword_fight", 6),
        ("sword_2", 2),
        ("sword_ex_1", 7),
        ("other_split", 3),
    ]:
        write_frames(frames / name, n)
    return frames, splits


# ---- fixtures: synthetic frame datasets, made once per module ------------------------------------
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """Four train + four val videos of NUM_FRAMES 48x40 JPEGs. Read-only: tests that break frames
    copy."""
    root = tmp_path_factory.mktemp("synth")
    train_list, val_list = prepare.make_synth(
        root, classes=4, videos=4, frames=NUM_FRAMES, size=(W, H)
    )
    return root, Path(train_list), Path(val_list)


@pytest.fixture(scope="module")
def lists(tmp_path_factory):
    """(train.txt, val.txt) of 8 videos each: with TINY's -b 4, two optimizer steps per epoch."""
    out = tmp_path_factory.mktemp("tiny")
    train_list, val_list = prepare.make_synth(out, classes=4, videos=8, frames=10, size=(48, 40))
    return str(train_list), str(val_list)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """(train.txt of 12 videos, val7.txt): an odd-length val list, so a 2-process split is uneven
    (the case where padded samplers go wrong)."""
    out = tmp_path_factory.mktemp("tiny")
    train_list, val_list = prepare.make_synth(out, classes=4, videos=12, frames=10, size=(48, 40))
    lines = Path(val_list).read_text().splitlines()[:7]
    odd = out / "val7.txt"
    odd.write_text("\n".join(lines) + "\n")
    return str(train_list), str(odd)


def tiny_videomae_config(transformers, **kw):
    """transformers' VideoMAEConfig: 2 blocks ViT-S wide, 4 x 32 x 32 clips, 5 classes."""
    size = dict(image_size=32, num_frames=4, hidden_size=384, num_hidden_layers=2)
    heads = dict(num_attention_heads=6, intermediate_size=1536, num_labels=5)
    return transformers.VideoMAEConfig(**size, **heads, attn_implementation="sdpa", **kw)


def randomise_zoo(m, seed=0):
    """Every BN weight, bias and statistic and every bias of m random (nothing stays 0 or 1: the
    zero-init BNs neither), drawn in m's dtype (float32: as the zoos' files hold them); conv and
    linear weights keep their fan-in-scaled init, so that 100 blocks stay finite. m in eval mode."""
    g = torch.Generator().manual_seed(seed)
    for name, t in m.state_dict().items():
        if t.is_floating_point() and t.dim() <= 1:
            r = torch.rand(t.shape, generator=g, dtype=t.dtype)
            if name.endswith("running_var"):
                t.copy_(0.5 + r)
            else:  # BN scales in [0.2, 0.6]: 100 residual blocks stay far from overflowing
                t.copy_(0.2 + 0.4 * r if name.endswith("bn.weight") else (r - 0.5) * 0.4)
    return m.eval()
