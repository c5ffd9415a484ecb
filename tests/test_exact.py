"""Exactness: resume at an epoch boundary, SIGTERM mid-epoch then resume, and DDP evaluation (2
processes, torchrun, gloo) equal the uninterrupted single-process run, bit for bit (scores to 1e-5).

A fork checks that its new option keeps these properties with one command; the flags are appended to
every trainer command here (after the tests' own, so they win where both set a flag):

    python -m pytest -q tests/test_exact.py --trainer-flags="--your_flag 3"

Checkpoints compare the weights and, with --model-ema, the EMA weights.
"""

import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

import flags
import train
from conftest import ENV, REPO, TINY, acc_line, assert_same_weights, run_cli, run_main


def assert_same_run(a, b):
    """Two checkpoint files hold the same weights bit for bit, and the same EMA weights
    (--model-ema)."""
    a, b = (torch.load(p, map_location="cpu", weights_only=False) for p in (a, b))
    assert_same_weights(a["model"], b["model"])
    assert (a.get("model_ema") is None) == (b.get("model_ema") is None)
    if a.get("model_ema") is not None:
        assert_same_weights(a["model_ema"], b["model_ema"])
        assert a["model_ema_updates"] == b["model_ema_updates"]


def torchrun(*argv):
    """python -m torch.distributed.run with 2 CPU processes (gloo): train.py ARGV."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(REPO / "train.py"),
        *argv,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("workers, schedule", [("0", []), ("2", ["-b", "2", "--iter_size", "2"])])
def test_resume_is_exact(tiny_data, tmp_path, workers, schedule, trainer_flags):
    # 3 epochs in one run == 2 epochs, then --resume for the 3rd: same weights, bit for bit.
    args = [
        "ucf101",
        *tiny_data,
        *TINY,
        "-j",
        workers,
        "--dro",
        "0.5",
        "--warmup",
        "0.5",
        *schedule,
    ]
    run_main([*args, "--epochs", "3", "--output_root", str(tmp_path / "a"), *trainer_flags])
    run_main([*args, "--epochs", "2", "--output_root", str(tmp_path / "b"), *trainer_flags])
    name = flags.run_dir_name(train.parse_args([*args, *trainer_flags]))
    run_main(
        [
            *args,
            "--epochs",
            "3",
            "--output_root",
            str(tmp_path / "b"),
            "--resume",
            "auto",
            *trainer_flags,
        ]
    )
    assert_same_run(*(tmp_path / r / name / "checkpoint.pth" for r in "ab"))
    assert torch.load(tmp_path / "b" / name / "checkpoint.pth", weights_only=False)["epoch"] == 3


@pytest.mark.slow
def test_ddp_trains_and_evaluates_exactly(tiny_data, tmp_path, trainer_flags):
    # torchrun with 2 CPU processes (gloo); 7 val videos split 4 + 3 must give the single-process
    # numbers.
    common = ["ucf101", *tiny_data, *TINY, "--epochs", "1"]
    r = torchrun(
        *common,
        "--ddp",
        "-b",
        "2",
        "--iter_size",
        "2",
        "--lr_policy",
        "cosine",
        "--output_root",
        str(tmp_path / "ddp"),
        *trainer_flags,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 process(es)" in r.stdout and r.stdout.count("run folder") == 1  # only rank 0 prints
    name = flags.run_dir_name(train.parse_args([*common, *trainer_flags]))
    ckpt = str(tmp_path / "ddp" / name / "checkpoint.pth")
    if "--pretrain" in trainer_flags:  # pretraining: the val loss (reconstruction, prediction)
        evaluate = [*common, "--evaluate", "--resume", ckpt, *trainer_flags]
        r2 = torchrun(*evaluate, "--ddp", "--output_root", str(tmp_path / "e2"))
        r1 = run_cli([*evaluate, "--output_root", str(tmp_path / "e1")], timeout=300)
        assert r2.returncode == 0 and r1.returncode == 0, r2.stderr[-3000:] + r1.stderr[-3000:]
        losses = [float(re.search(r" \* val \w+ loss (\S+)", r.stdout)[1]) for r in (r1, r2)]
        assert abs(losses[0] - losses[1]) < 1e-5 * losses[0], losses
        return
    evaluate = [
        *common,
        "--evaluate",
        "--resume",
        ckpt,
        "--save_scores",
        "--test_clips",
        "2",
        "--test_crops",
        "3",
    ]
    r2 = torchrun(*evaluate, "--ddp", "--output_root", str(tmp_path / "e2"), *trainer_flags)
    assert r2.returncode == 0, r2.stderr[-3000:]
    r1 = run_cli([*evaluate, "--output_root", str(tmp_path / "e1"), *trainer_flags], timeout=300)
    assert r1.returncode == 0, r1.stderr[-3000:]
    assert acc_line(r2.stdout) == acc_line(r1.stdout)
    s1, s2 = (np.load(next((tmp_path / e).rglob("scores_2x3_*.npz"))) for e in ("e1", "e2"))
    assert s1["scores"].shape == (7, 101)
    assert (s1["labels"] == s2["labels"]).all() and abs(s1["scores"] - s2["scores"]).max() < 1e-5


@pytest.mark.slow
def test_sigterm_saves_and_resumes_exactly(tiny_data, tmp_path, trainer_flags):
    args = ["ucf101", *tiny_data, *TINY, "--epochs", "3", "--dro", "0.5"]
    name = flags.run_dir_name(train.parse_args([*args, *trainer_flags]))
    # All three runs as subprocesses with one thread each: the same float summation order
    # everywhere.
    ref = run_cli([*args, "--output_root", str(tmp_path / "ref"), *trainer_flags], timeout=600)
    assert ref.returncode == 0, ref.stderr[-2000:]
    # Interrupt a second run mid-training, then resume it from its checkpoint.
    p = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "train.py"),
            *args,
            "--output_root",
            str(tmp_path / "x"),
            *trainer_flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    for line in p.stdout:  # wait until it is inside the second epoch's loop
        if line.startswith("epoch 1 ["):
            p.send_signal(signal.SIGTERM)
            break
    out, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "saved" in out
    ckpt = torch.load(tmp_path / "x" / name / "checkpoint.pth", weights_only=False)
    assert ckpt["epoch"] == 1 and ckpt["iter"] >= 1
    r = run_cli(
        [*args, "--output_root", str(tmp_path / "x"), "--resume", "auto", *trainer_flags],
        timeout=600,
    )
    assert r.returncode == 0 and "resumed from" in r.stdout, r.stderr[-2000:]
    assert_same_run(*(tmp_path / r / name / "checkpoint.pth" for r in ("ref", "x")))
