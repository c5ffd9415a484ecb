"""train.py: schedule, gradient accumulation, resume rules, run folders, faults and flags.

Every fault that could hang runs in a subprocess with a timeout; the rest call train.main
in-process.
"""

from pathlib import Path
import errno
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import numpy as np
import torch

import data
import flags
import report
import rundir
import train
from conftest import (
    ENV,
    REPO,
    TINY,
    copy_lists,
    cuda,
    logs,
    one_line_error,
    run_cli,
    run_dir,
    run_main,
    spoil_frames,
    weights,
)


# ---- the lr schedule: a function of (flags, step) ------------------------------------------------
def test_lr_at_step_cosine_and_warmup():
    a = train.parse_args(["x", "a", "b", "--lr", "0.1", "--lr_steps", "2", "3", "--epochs", "4"])
    assert [train.lr_at(a, s, 10) for s in (0, 19, 20, 29, 30, 39)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001, 0.001]
    )
    a.warmup = 1.0  # 10 steps of linear warmup: step s has lr (s + 1) / 10 x lr
    assert [train.lr_at(a, s, 10) for s in (0, 4, 9, 10)] == pytest.approx([0.01, 0.05, 0.1, 0.1])
    c = train.parse_args(["x", "a", "b", "--lr", "0.1", "--lr_policy", "cosine", "--epochs", "4"])
    for s in (0, 7, 20, 33, 40):
        assert train.lr_at(c, s, 10) == pytest.approx(0.05 * (1 + math.cos(math.pi * s / 40)))


@pytest.mark.slow
def test_logged_lr_is_the_lr_used_and_resume_follows_new_epochs(lists, tmp_path):
    # 2 epochs of a 2-epoch cosine schedule, then resume with --epochs 4: epochs 2-3 follow the
    # 4-epoch cosine (no stale saved scheduler), and each logged lr is the one of that epoch's last
    # step.
    args = [
        "ucf101",
        *lists,
        *TINY,
        "--lr_policy",
        "cosine",
        "--lr",
        "0.1",
        "--output_root",
        str(tmp_path),
    ]
    run_main([*args, "--epochs", "2"])
    run_main([*args, "--epochs", "4", "--resume", "auto"])
    got = [log["lr"] for log in logs(run_dir(tmp_path, args))]
    a2, a4 = train.parse_args([*args, "--epochs", "2"]), train.parse_args([*args, "--epochs", "4"])
    want = [
        train.lr_at(a2, 1, 2),
        train.lr_at(a2, 3, 2),
        train.lr_at(a4, 5, 2),
        train.lr_at(a4, 7, 2),
    ]
    assert got == pytest.approx(want)
    assert got[1] == pytest.approx(0.05 * (1 + math.cos(math.pi * 3 / 4)))  # not the next step's lr


@pytest.mark.slow
def test_start_epoch_starts_there_with_that_epochs_lr(lists, tmp_path):
    args = [
        "ucf101",
        *lists,
        *TINY,
        "--lr_steps",
        "1",
        "--start-epoch",
        "2",
        "--epochs",
        "3",
        "--output_root",
        str(tmp_path),
    ]
    run_main(args)
    (log,) = logs(run_dir(tmp_path, args))
    assert log["epoch"] == 2 and log["lr"] == pytest.approx(0.001)


# ---- gradient accumulation -----------------------------------------------------------------------
@pytest.mark.slow
def test_iter_size_2_b_2_equals_b_4_and_resumes_exactly_mid_epoch(lists, tmp_path, monkeypatch):
    # BN frozen (eval mode): no batch statistics, so 2 x 2 accumulated == one batch of 4 up to float
    # rounding.
    common = ["ucf101", *lists, *TINY, "--freeze_bn", "--epochs", "2"]
    run_main([*common, "-b", "4", "--output_root", str(tmp_path / "b4")])
    run_main([*common, "-b", "2", "--iter_size", "2", "--output_root", str(tmp_path / "acc")])
    w4 = weights(run_dir(tmp_path / "b4", common) / "checkpoint.pth")
    wacc = weights(run_dir(tmp_path / "acc", common) / "checkpoint.pth")
    for k in w4:
        assert torch.allclose(w4[k].float(), wacc[k].float(), atol=1e-6, rtol=1e-5), k
    # The same accumulated run, stopped by a signal after its first optimizer step, then resumed.
    seen = []

    def lr_and_signal(args, step, steps_per_epoch):
        seen.append(step)
        # both batches of step 0 ran: the stop is checked after it
        if step == 0 and seen.count(0) == 2:
            rundir.STOP["signal"] = signal.SIGTERM
        return original(args, step, steps_per_epoch)

    original = train.lr_at
    monkeypatch.setattr(train, "lr_at", lr_and_signal)
    stopped = ["-b", "2", "--iter_size", "2", "--output_root", str(tmp_path / "stop")]
    with pytest.raises(SystemExit) as e:
        run_main([*common, *stopped])
    rundir.STOP["signal"] = 0
    assert e.value.code == 128 + signal.SIGTERM
    ckpt = torch.load(run_dir(tmp_path / "stop", common) / "checkpoint.pth", weights_only=False)
    assert (ckpt["epoch"], ckpt["iter"]) == (0, 2)  # mid-epoch: 2 of its 4 batches done
    monkeypatch.setattr(train, "lr_at", original)
    run_main([*common, *stopped, "--resume", "auto"])
    resumed = weights(run_dir(tmp_path / "stop", common) / "checkpoint.pth")
    for k in wacc:
        assert torch.equal(wacc[k], resumed[k]), k


@pytest.mark.slow
def test_mid_epoch_resume_needs_the_same_global_batch(lists, tmp_path, monkeypatch, capsys):
    args = ["ucf101", *lists, *TINY, "--epochs", "2", "--output_root", str(tmp_path)]
    original = train.lr_at

    def stop_at_step_0(a, step, n):
        rundir.STOP["signal"] = signal.SIGTERM
        return original(a, step, n)

    monkeypatch.setattr(train, "lr_at", stop_at_step_0)
    with pytest.raises(SystemExit):
        run_main(args)
    rundir.STOP["signal"] = 0
    monkeypatch.setattr(train, "lr_at", original)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main([*args, "-b", "2", "--resume", "auto"])
    one_line_error(capsys, "global batch of 4", "this run has 2", exc=e)
    # (another --t_length is another run folder: name the checkpoint)
    with pytest.raises(SystemExit) as e:
        run_main(
            [*args, "--t_length", "2", "--resume", str(run_dir(tmp_path, args) / "checkpoint.pth")]
        )
    one_line_error(capsys, "--t_length 4, not 2", exc=e)


# ---- run folders, disk, checkpoints --------------------------------------------------------------
@pytest.mark.slow
def test_run_folder_is_never_silently_reused(lists, tmp_path, capsys):
    args = ["ucf101", *lists, *TINY, "--epochs", "1", "--output_root", str(tmp_path)]
    run_main(args)
    folder = run_dir(tmp_path, args)
    before = (folder / "checkpoint.pth").read_bytes()
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main([*args, "--lr", "0.5"])
    one_line_error(capsys, str(folder), "--resume auto", "--run_name", exc=e)
    assert (folder / "checkpoint.pth").read_bytes() == before and len(logs(folder)) == 1
    run_main([*args, "--lr", "0.5", "--run_name", "other"])
    assert (tmp_path / "other" / "checkpoint.pth").exists()


@pytest.mark.parametrize("case", ["file", "under_a_file"])
def test_unwritable_output_fails_before_any_work(lists, tmp_path, capsys, case):
    (tmp_path / "f").write_text("x")
    root = tmp_path / "f" if case == "under_a_file" else tmp_path
    name = ["--run_name", "f"] if case == "file" else []
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *lists, *TINY, "--output_root", str(root), *name])
    one_line_error(capsys, "run folder", exc=e)


@pytest.mark.slow
def test_disk_full_during_save_keeps_the_last_checkpoint(lists, tmp_path, monkeypatch, capsys):
    args = ["ucf101", *lists, *TINY, "--epochs", "3", "--output_root", str(tmp_path)]
    real_save, calls = torch.save, []

    def save(obj, f, *a, **k):  # the second checkpoint hits a full disk after writing some bytes
        calls.append(1)
        if len(calls) == 2:
            f.write(b"partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(SystemExit) as e:
        run_main(args)
    folder = run_dir(tmp_path, args)
    one_line_error(capsys, str(folder / "checkpoint.pth"), "MiB free", code=1, exc=e)
    names = {p.name for p in folder.iterdir()}
    assert {"checkpoint.pth", "log.jsonl"} <= names and not [n for n in names if ".tmp" in n], names
    assert torch.load(folder / "checkpoint.pth", weights_only=False)["epoch"] == 1
    monkeypatch.setattr(torch, "save", real_save)
    (folder / "checkpoint.pth.tmp").write_bytes(b"left by a killed save")
    (folder / "notes.tmpl").write_text("the user's, not ours")
    # space is back: continues from epoch 1, the litter is gone
    run_main([*args, "--resume", "auto"])
    assert [log["epoch"] for log in logs(folder)] == [0, 1, 2]
    assert not (folder / "checkpoint.pth.tmp").exists()
    assert (folder / "notes.tmpl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["text", "empty", "truncated", "bare", "classes"])
def test_bad_resume_files_are_one_line(lists, tmp_path, capsys, kind):
    args = ["ucf101", *lists, *TINY, "--epochs", "1"]
    good = run_dir(tmp_path / "good", args) / "checkpoint.pth"
    run_main([*args, "--output_root", str(tmp_path / "good")])
    bad = tmp_path / "bad.pth"
    blob = good.read_bytes()
    bad.write_bytes(
        {"text": b"hello\n", "empty": b"", "truncated": blob[: len(blob) // 2]}.get(kind, b"")
    )
    if kind == "bare":
        torch.save(weights(good), bad)
    if kind == "classes":
        bad = good
    flags = ["--num_classes", "7"] if kind == "classes" else []
    for evaluate in ([], ["--evaluate"]):
        if kind == "bare" and evaluate:
            continue  # weights are all --evaluate needs
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            run_main(
                [
                    *args,
                    *flags,
                    *evaluate,
                    "--resume",
                    str(bad),
                    "--output_root",
                    str(tmp_path / "x"),
                ]
            )
        one_line_error(capsys, str(bad), exc=e)


@pytest.mark.slow
def test_bad_training_video_is_replaced_reported_once_and_limited(lists, tmp_path, capsys):
    folder, bad_video = copy_lists(lists, tmp_path)
    spoil_frames(folder, bad_video)
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TINY,
        "-b",
        "2",
        "--iter_size",
        "2",
    ]
    run_main([*args, "--epochs", "2", "--output_root", str(tmp_path / "a")])
    # once, over 2 epochs
    (line,) = (run_dir(tmp_path / "a", args) / "bad_videos.txt").read_text().splitlines()
    assert "train.txt:1:" in line and bad_video in line
    assert capsys.readouterr().err.count("bad video replaced") == 1
    # the limit: counted in the step it happens, whatever its batch
    with pytest.raises(SystemExit) as e:
        run_main(
            [*args, "--epochs", "2", "--max_bad_videos", "0", "--output_root", str(tmp_path / "b")]
        )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    one_line_error(
        err, "1 bad videos replaced, more than --max_bad_videos 0", "--resume auto", exc=e
    )
    ckpt = torch.load(run_dir(tmp_path / "b", args) / "checkpoint.pth", weights_only=False)
    assert ckpt["iter"] % 2 == 0 and ckpt["bad_seen"] == [f"{folder / 'train.txt'}:1"]


# ---- flags ---------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "flags, needle",
    [
        (["-j", "-1"], "-j/--workers"),
        (["--seed", "-1"], "--seed"),
        (["--start-epoch", "-1"], "--start-epoch"),
        (["--label-smoothing", "1.5"], "--label-smoothing"),
        (["--warmup", "-2"], "--warmup"),
        (["--num_classes", "0"], "--num_classes"),
        (["--lr", "nan"], "--lr"),
    ],
)
def test_bad_flags_are_one_line_naming_the_flag(flags, needle):
    r = run_cli(["ucf101", "a.txt", "b.txt", *flags], timeout=60)
    assert r.returncode == 2
    one_line_error(r.stderr, needle)


def test_unknown_arch_is_reported_first(lists, tmp_path, capsys):
    # A 8-video list with the default -b 64 would fail too; the arch is what the user must hear
    # about.
    with pytest.raises(SystemExit) as e:
        run_main(
            [
                "ucf101",
                *lists,
                "--arch",
                "resnet999_3d",
                "--device",
                "cpu",
                "--output_root",
                str(tmp_path),
            ]
        )
    one_line_error(capsys, "resnet999_3d", exc=e)


@pytest.mark.slow
def test_val_label_unseen_in_training_is_a_warning(lists, tmp_path, capsys):
    val = tmp_path / "val.txt"
    lines = Path(lists[1]).read_text().splitlines()
    val.write_text("\n".join(lines[:3] + [lines[3].rsplit(" ", 1)[0] + " 9"]) + "\n")
    run_main(
        [
            "ucf101",
            lists[0],
            str(val),
            *TINY,
            "--epochs",
            "1",
            "--data_root",
            str(Path(lists[1]).parent),
            "--output_root",
            str(tmp_path),
        ]
    )
    assert f"{val}:4: label 9 never occurs in {lists[0]}" in capsys.readouterr().err


def test_each_epoch_has_its_own_order(lists, tmp_path):
    # Without train_sampler.set_epoch every epoch would replay epoch 0's order.
    args = train.parse_args(["ucf101", *lists, *TINY, "--output_root", str(tmp_path)])
    flags.check_args(args)
    d = train.build_data(args, train.setup_runtime(args))
    orders = [list(train.train_loader(args, d, epoch, 0).sampler) for epoch in (0, 1, 2)]
    assert sorted(orders[0]) == sorted(orders[1]) and len({tuple(o) for o in orders}) == 3
    # a resumed epoch skips what it did
    assert list(train.train_loader(args, d, 1, 1).sampler) == orders[1][4:]


@pytest.mark.slow
def test_fine_tuning_modes_freeze_what_they_say(lists, tmp_path):
    args = ["ucf101", *lists, *TINY, "--epochs", "1", "--lr", "0.1"]
    run_main([*args, "--output_root", str(tmp_path / "a")])
    first = weights(run_dir(tmp_path / "a", args) / "checkpoint.pth")
    for mode, root in (("--freeze_bn", "bn"), ("--fc_only", "fc")):
        run_main(
            [
                *args,
                mode,
                "--pretrained",
                str(run_dir(tmp_path / "a", args) / "checkpoint.pth"),
                "--output_root",
                str(tmp_path / root),
            ]
        )
        after = weights(run_dir(tmp_path / root, args) / "checkpoint.pth")
        bn = [k for k in first if ".bn" in f".{k}" or "downsample.1" in k]
        # statistics and affine fixed
        assert bn and all(torch.equal(first[k], after[k]) for k in bn), mode
        convs = [k for k in first if k.endswith("conv1.weight")]
        assert all(torch.equal(first[k], after[k]) for k in convs) == (mode == "--fc_only"), mode
        assert not torch.equal(first["fc.weight"], after["fc.weight"])


# ---- recipes (@FILE), args.txt, and what --evaluate / predict take from a checkpoint -------------
ORIGINAL = (
    "ucf101 train.txt val.txt --arch resnet50_3d --dro 0.2 --mode 3D --t_length 16 --t_stride 4 "
    "--pretrained --epochs 95 --batch-size 64 --lr 0.001 --lr_steps 40 80 90 --workers 16 "
    "--image_tmpl img_{:05d}.jpg"
)


def test_recipe_files_parse_as_their_command_lines(tmp_path):
    recipes = REPO / "recipes"
    ucf = train.parse_args(["ucf101", "train.txt", "val.txt", f"@{recipes / 'ucf101_i3d.txt'}"])
    assert vars(ucf) == vars(train.parse_args(ORIGINAL.split()))  # the original command, verbatim
    k400 = train.parse_args(["ucf101", "a", "b", f"@{recipes / 'kinetics_finetune.txt'}"])
    assert (k400.pretrained, k400.t_length, k400.t_stride, k400.lr_policy) == (
        "kinetics400",
        8,
        8,
        "cosine",
    )
    # several flags on a line, '#' comments, blank lines; flags after the file override it
    own = tmp_path / "own.txt"
    own.write_text(
        "# mine\n--lr_steps 4 8   # two steps\n\n--epochs 9 -b 2\n--image_tmpl 'a #{:03d}.png'\n"
    )
    a = train.parse_args(["ucf101", "a", "b", f"@{own}", "--epochs", "3"])
    assert (a.lr_steps, a.epochs, a.batch_size, a.image_tmpl) == ([4, 8], 3, 2, "a #{:03d}.png")
    # `python train.py demo` is recipes/demo.txt: the demo's settings, any of them overridable
    demo = train.parse_args(["demo"])
    assert vars(demo) == vars(train.parse_args(["demo", f"@{recipes / 'demo.txt'}"]))
    assert {
        k: vars(demo)[k]
        for k in (
            "arch",
            "t_length",
            "t_stride",
            "new_size",
            "crop_size",
            "epochs",
            "batch_size",
            "lr",
            "lr_steps",
            "warmup",
            "dropout",
            "workers",
            "eval_freq",
            "print_freq",
            "clip_grad",
        )
    } == dict(
        arch="resnet10_3d",
        t_length=8,
        t_stride=3,
        new_size=48,
        crop_size=40,
        epochs=12,
        batch_size=8,
        lr=0.03,
        lr_steps=[10],
        warmup=1,
        dropout=0.0,
        workers=2,
        eval_freq=1,
        print_freq=8,
        clip_grad=1.0,
    )
    assert train.parse_args(["demo", "--epochs", "3"]).epochs == 3


@pytest.mark.slow
def test_args_txt_reruns_the_run_and_evaluate_keeps_it(lists, tmp_path):
    argv = [
        "ucf101",
        *lists,
        *TINY,
        "--epochs",
        "1",
        "--no_flip",
        "--mean",
        "0.5",
        "0.5",
        "0.5",
        "--image_tmpl",
        "img_{:05d}.jpg",
        "--output_root",
        str(tmp_path),
    ]
    run_main(argv)
    folder = run_dir(tmp_path, argv)
    text = (folder / "args.txt").read_text()
    assert "--lr_steps 2.0\n" in text and "--no_flip\n" in text and "--t_length 4\n" in text
    want, got = train.parse_args(argv), train.parse_args([f"@{folder / 'args.txt'}"])
    flags.check_args(want)
    flags.check_args(got)
    assert vars(got) == vars(want)
    # evaluating in the run's own folder leaves its args.txt alone
    run_main([*argv, "--evaluate", "--resume", str(folder / "checkpoint.pth")])
    assert (folder / "args.txt").read_text() == text
    # `@args.txt --resume auto` continues the run, here for one more epoch
    run_main([f"@{folder / 'args.txt'}", "--resume", "auto", "--epochs", "2"])
    assert [log["epoch"] for log in logs(folder)] == [0, 1]


def test_evaluate_and_predict_take_the_checkpoints_model_and_clip_flags(tmp_path):
    saved = {
        **vars(train.parse_args(["ucf101", "a", "b", *TINY, "--test_sampling", "pyslowfast"])),
        "num_classes": 7,
        "train_list": "elsewhere.txt",
        "device": "cuda:3",
        "world_size": 8,
    }
    torch.save({"args": saved}, tmp_path / "ck.pth")
    args = train.parse_args(
        [
            "ucf101",
            "x.txt",
            "y.txt",
            "--evaluate",
            "--resume",
            str(tmp_path / "ck.pth"),
            "--crop_size",
            "28",
            "--device",
            "cpu",
        ]
    )
    assert (args.arch, args.t_length, args.new_size, args.num_classes) == ("resnet10_3d", 4, 36, 7)
    assert (args.test_sampling, args.crop_size) == ("pyslowfast", 28)
    assert (args.train_list, args.device) == ("x.txt", "cpu")
    # flags of the process are not taken
    assert args.batch_size == 64 and not hasattr(args, "world_size")
    # a flag a fork adds reaches --evaluate and predict from the checkpoint, with no edit there
    parser = train.get_args_parser()
    parser.add_argument("--segments", type=int, default=1)
    ckpt = {"args": {**saved, "segments": 3}}
    assert flags.checkpoint_args(ckpt, ["ucf101"], parser).segments == 3


# ---- one step of each flag the rest of the suite does not run ------------------------------------
def test_clip_grad_bounds_the_first_step(lists, tmp_path):
    # First SGD step with no weight decay: the update is lr x the clipped gradient, so its norm <=
    # lr x max.
    args = [
        "ucf101",
        *lists,
        *TINY,
        "--epochs",
        "1",
        "-b",
        "8",
        "--wd",
        "0",
        "--lr",
        "1",
        "--clip-grad",
        "0.001",
    ]
    run_main([*args, "--output_root", str(tmp_path)])
    torch.manual_seed(0)
    init = train.models.build_network("resnet10_3d", 101).state_dict()
    after = weights(run_dir(tmp_path, args) / "checkpoint.pth")
    change = torch.cat(
        [
            (after[k] - init[k]).flatten()
            for k in init
            if init[k].dtype.is_floating_point and "running" not in k
        ]
    )
    assert 0 < change.norm() <= 0.001 * 1.0001


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags",
    [
        ["--amp", "bf16", "--t_length", "8"],
        ["--channels-last"],
        ["--label-smoothing", "0.2"],
        ["--bn_bias_wd"],
        ["--no_flip"],
        ["--iter_size", "2", "-b", "2", "--ddp"],
    ],
)
def test_one_epoch_with_flag(lists, tmp_path, flags):
    if "--ddp" in flags:  # one-process torchrun: DDP with no_sync on the accumulation steps
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc_per_node=1",
                str(REPO / "train.py"),
                "ucf101",
                *lists,
                *TINY,
                *flags,
                "--epochs",
                "1",
                "--output_root",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=240,
        )
        assert r.returncode == 0, r.stderr[-2000:]
    else:
        run_main(["ucf101", *lists, *TINY, *flags, "--epochs", "1", "--output_root", str(tmp_path)])
    (folder,) = tmp_path.iterdir()
    (log,) = logs(folder)
    assert math.isfinite(log["train_loss"]) and log["val_top1"] is not None
    ckpt = torch.load(folder / "checkpoint.pth", weights_only=False)
    assert all(v.dtype != torch.bfloat16 for v in ckpt["model"].values())
    assert ckpt["args"]["mean"] == data.MEAN


def test_cpu_bf16_with_clips_shorter_than_the_stem_kernel_is_refused(lists, tmp_path, capsys):
    # torch's CPU bf16 conv3d weight gradient is NaN for T=4 under the 5x7x7 stem (it was a NaN loss
    # at step 2).
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *lists, *TINY, "--amp", "bf16", "--output_root", str(tmp_path)])
    one_line_error(capsys, "--amp bf16", "--t_length >= 5", exc=e)


@pytest.mark.slow
def test_normalisation_follows_the_weights_and_is_saved(lists, tmp_path, capsys):
    # A run trained with Kinetics statistics; fine-tuning from it uses them without being told, and
    # stores them; --mean/--std override.
    kinetics = ["--mean", "0.45", "0.45", "0.45", "--std", "0.225", "0.225", "0.225"]
    args = ["ucf101", *lists, *TINY, "--epochs", "1"]
    run_main([*args, *kinetics, "--output_root", str(tmp_path / "a")])
    first = run_dir(tmp_path / "a", args) / "checkpoint.pth"
    assert torch.load(first, weights_only=False)["args"]["mean"] == (0.45,) * 3
    capsys.readouterr()
    run_main([*args, "--pretrained", str(first), "--output_root", str(tmp_path / "b")])
    assert "input mean (0.45, 0.45, 0.45) std (0.225, 0.225, 0.225)" in capsys.readouterr().out
    ckpt = torch.load(run_dir(tmp_path / "b", args) / "checkpoint.pth", weights_only=False)
    assert (ckpt["args"]["mean"], ckpt["args"]["std"]) == ((0.45,) * 3, (0.225,) * 3)
    run_main(
        [
            *args,
            "--pretrained",
            str(first),
            "--mean",
            "0.5",
            "0.5",
            "0.5",
            "--output_root",
            str(tmp_path / "c"),
        ]
    )
    saved = torch.load(run_dir(tmp_path / "c", args) / "checkpoint.pth", weights_only=False)
    assert saved["args"]["mean"] == (0.5,) * 3


def test_flags_reach_their_targets(lists, tmp_path):
    args = train.parse_args(
        [
            "ucf101",
            *lists,
            *TINY,
            "--no_flip",
            "--bn_bias_wd",
            "--label-smoothing",
            "0.2",
            "--output_root",
            str(tmp_path),
        ]
    )
    flags.check_args(args)
    rt = train.setup_runtime(args)
    assert train.build_data(args, rt).train_ds.flip is False
    net = train.build_net(args, rt)
    groups = net.optimizer.param_groups
    # all decayed
    assert [g["weight_decay"] for g in groups] == [5e-4, 0.0] and len(groups[1]["params"]) == 0


# ---- faults in workers and ranks: no hang, one line ----------------------------------------------
@pytest.mark.slow
def test_bad_val_frame_with_workers_ends_promptly_with_one_line(lists, tmp_path):
    root = Path(lists[0]).parent
    folder = tmp_path / "copy"
    shutil.copytree(root, folder)
    first_val = Path(lists[1]).read_text().split()[0]
    # read by the centred clip; the early check sees frames 1 and 10
    os.remove(folder / first_val / "img_00004.jpg")
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TINY,
        "-j",
        "2",
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path / "out"),
    ]
    r = run_cli(args, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    err = one_line_error(r.stderr.strip().splitlines()[-1], "img_00004.jpg", "val.txt:1")
    assert "validation stopped (checkpoint.pth saved)" in err
    assert (
        torch.load(run_dir(tmp_path / "out", args) / "checkpoint.pth", weights_only=False)["epoch"]
        == 1
    )
    ckpt = str(run_dir(tmp_path / "out", args) / "checkpoint.pth")
    r = run_cli([*args, "--evaluate", "--resume", ckpt], timeout=120)
    assert r.returncode == 2
    one_line_error(r.stderr, "evaluation stopped", "img_00004.jpg")


@pytest.mark.slow
def test_process_group_sigterm_with_workers_saves(lists, tmp_path):
    # SIGTERM to the whole process group (preemption, Ctrl-C): workers must not die before the main
    # process saves.
    args = ["ucf101", *lists, *TINY, "-j", "2", "--epochs", "50", "--output_root", str(tmp_path)]
    p = subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=REPO,
        start_new_session=True,
    )
    try:
        for line in p.stdout:
            if line.startswith("epoch 1 ["):
                os.killpg(p.pid, signal.SIGTERM)
                break
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert torch.load(run_dir(tmp_path, args) / "checkpoint.pth", weights_only=False)["epoch"] >= 1


@pytest.mark.slow
def test_ddp_rank_failure_ends_every_rank(lists, tmp_path):
    # 2 ranks evaluate; the bad video is in rank 1's shard only. Both must end, non-zero, with the
    # message.
    folder, _ = copy_lists(lists, tmp_path)
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TINY,
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path),
    ]
    assert run_cli(args).returncode == 0
    second_val = (folder / "val.txt").read_text().splitlines()[1].split()[0]
    (folder / second_val / "img_00004.jpg").write_bytes(b"not a jpeg")
    ckpt = str(run_dir(tmp_path, args) / "checkpoint.pth")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(REPO / "train.py"),
            *args,
            "--ddp",
            "-j",
            "2",
            "--evaluate",
            "--resume",
            ckpt,
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=180,
    )
    assert r.returncode != 0
    assert (
        "evaluation stopped" in r.stderr and "img_00004.jpg" in r.stderr and "val.txt:2" in r.stderr
    )


# ---- results people can read: names, per-class report, pictures; exact under DDP -----------------
@pytest.mark.slow
def test_ddp_validation_and_per_class_report_are_exact(lists, tmp_path):
    from PIL import Image

    folder, _ = copy_lists(lists, tmp_path)
    names = [f"class_{i}" for i in range(101)]
    # found beside the train list
    (folder / "ucf101_classes.txt").write_text("\n".join(names) + "\n")
    args = [
        "ucf101",
        str(folder / "train.txt"),
        str(folder / "val.txt"),
        *TINY,
        "--epochs",
        "1",
        "-b",
        "2",
    ]
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(REPO / "train.py"),
    ]
    r = subprocess.run(
        [*torchrun, *args, "--ddp", "--output_root", str(tmp_path / "ddp")],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    trained = run_dir(tmp_path / "ddp", args)
    ckpt = torch.load(trained / "checkpoint.pth", weights_only=False)
    assert ckpt["class_names"] == names
    for png in ("curves.png", "confusion_1x1.png"):
        with Image.open(trained / png) as im:
            assert im.size[0] > 300 and im.size[1] > 200, png
    # Validation during DDP training scored every shard with rank 0's BN statistics, the saved ones:
    # its val_loss is the single-process evaluation's of checkpoint.pth.
    evaluate = [
        *args,
        "--evaluate",
        "--resume",
        str(trained / "checkpoint.pth"),
        "--test_clips",
        "2",
        "--test_crops",
        "3",
        "--save_scores",
    ]
    r1 = run_cli([*evaluate, "--output_root", str(tmp_path / "e1")], timeout=300)
    assert r1.returncode == 0, r1.stderr[-3000:]
    r2 = subprocess.run(
        [*torchrun, *evaluate, "--ddp", "--output_root", str(tmp_path / "e2")],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert (
        r1.stdout.strip().splitlines()[-1].startswith(" * Acc@1")
        and "mean class accuracy" in r1.stdout
    )
    e1, e2 = run_dir(tmp_path / "e1", args), run_dir(tmp_path / "e2", args)
    # named by protocol
    (csv1,), (csv2,) = (e1.glob("per_class_2x3_*.csv"), e2.glob("per_class_2x3_*.csv"))
    assert csv1.read_text() == csv2.read_text()
    (s,) = map(np.load, e1.glob("scores_2x3_*.npz"))
    assert list(s["class_names"]) == names
    pred, labels = s["scores"].argmax(1), s["labels"]
    mean_class = np.mean([(pred[labels == c] == c).mean() for c in np.unique(labels)]) * 100
    for out in (r1.stdout, r2.stdout):
        assert f"mean class accuracy {mean_class:.3f}" in out
    with Image.open(next(e1.glob("confusion_2x3_*.png"))) as im:
        assert im.size[0] == im.size[1] >= 600
    # The log's val_loss from the DDP run == the single-process loss of the same checkpoint, 1 clip.
    r3 = run_cli(
        [
            *args,
            "--evaluate",
            "--resume",
            str(trained / "checkpoint.pth"),
            "--save_scores",
            "--output_root",
            str(tmp_path / "e3"),
        ]
    )
    assert r3.returncode == 0, r3.stderr[-3000:]
    (s1,) = map(np.load, run_dir(tmp_path / "e3", args).glob("scores_1x1_*.npz"))
    loss = -np.log(
        np.maximum(s1["scores"][np.arange(len(s1["labels"])), s1["labels"]], 1e-12)
    ).mean()
    assert logs(trained)[0]["val_loss"] == pytest.approx(loss, rel=1e-5)


@pytest.mark.slow
def test_tensorboard_writes_events(lists, tmp_path, monkeypatch):
    """TensorBoard's scalars, and a number a fork adds to the meter (`meter.add`, here per step): it
    reaches log.jsonl, TensorBoard and a curves.png panel with no list edited."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    update = report.Meter.update

    def update_and_add(self, loss, logits, labels, it):
        update(self, loss, logits, labels, it)
        self.add("scratch", loss.detach() * 0 + 7.0, 1)

    monkeypatch.setattr(report.Meter, "update", update_and_add)
    run_main(
        ["ucf101", *lists, *TINY, "--epochs", "1", "--tensorboard", "--output_root", str(tmp_path)]
    )
    run = run_dir(tmp_path, ["ucf101", *lists, *TINY])
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    (log,) = report.read_log(str(run / "log.jsonl"))
    assert log["train_scratch"] == 7.0
    events = accumulator.EventAccumulator(str(run / "tensorboard")).Reload()
    assert [e.value for e in events.Scalars("train_scratch")] == [7.0]
    assert {"train_loss", "val_top1", "lr"} <= set(events.Tags()["scalars"])
    assert report.curve_panels([log])["scratch"] == [("train_scratch", "train")]


# ---- GPU: run where CUDA is present (skipped on CPU CI) ------------------------------------------


@cuda
@pytest.mark.parametrize(
    "flags",
    [
        ["--amp", "bf16"],
        ["--amp", "fp16"],
        ["--channels-last", "--amp", "bf16"],
        ["--compile"],
        ["--decode_device", "cuda"],
    ],
)
def test_gpu_one_epoch(lists, tmp_path, flags):
    args = [
        "ucf101",
        *lists,
        *TINY,
        "--device",
        "cuda",
        "--t_length",
        "8",
        *flags,
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path),
    ]
    run_main(args)
    (log,) = logs(run_dir(tmp_path, args))
    assert math.isfinite(log["train_loss"]) and log["val_top1"] is not None
    ckpt = torch.load(run_dir(tmp_path, args) / "checkpoint.pth", weights_only=False)
    if "fp16" in flags:
        assert ckpt["scaler"] and ckpt["scaler"]["scale"] > 0  # the GradScaler ran and was saved


@cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="DataParallel needs >= 2 GPUs")
def test_gpu_dataparallel(lists, tmp_path):
    args = [
        "ucf101",
        *lists,
        *TINY,
        "--device",
        "cuda",
        "--epochs",
        "1",
        "--output_root",
        str(tmp_path),
    ]
    run_main(args)
    ckpt = torch.load(run_dir(tmp_path, args) / "checkpoint.pth", weights_only=False)
    assert not any(k.startswith("module.") for k in ckpt["model"])


@cuda
def test_gpu_ddp_nccl_one_process(lists, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=1",
            str(REPO / "train.py"),
            "ucf101",
            *lists,
            *TINY,
            "--device",
            "cuda",
            "--ddp",
            "--epochs",
            "1",
            "--output_root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]


@cuda
def test_gpu_and_cpu_evaluate_one_checkpoint_alike(lists, tmp_path):
    args = ["ucf101", *lists, *TINY, "--epochs", "1", "--output_root", str(tmp_path / "t")]
    run_main(args)
    ckpt = str(run_dir(tmp_path / "t", args) / "checkpoint.pth")
    scores = {}
    for device in ("cpu", "cuda"):
        run_main(
            [
                *args[:-1],
                str(tmp_path / device),
                "--device",
                device,
                "--evaluate",
                "--resume",
                ckpt,
                "--test_clips",
                "2",
                "--test_crops",
                "3",
                "--save_scores",
            ]
        )
        (path,) = run_dir(tmp_path / device, args).glob("scores_2x3_*.npz")
        scores[device] = np.load(path)["scores"]
    assert np.abs(scores["cpu"] - scores["cuda"]).max() < 1e-3


# ---- user errors, kills and NaNs: one line, a loadable checkpoint (tiny_data: 12 train videos) ---
@pytest.mark.slow
def test_sigkill_leaves_a_loadable_checkpoint(tiny_data, tmp_path):
    args = ["ucf101", *tiny_data, *TINY, "--epochs", "50", "--output_root", str(tmp_path)]
    ckpt = tmp_path / flags.run_dir_name(train.parse_args(args)) / "checkpoint.pth"
    p = subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
        cwd=REPO,
    )
    try:
        deadline = time.time() + 120
        while not ckpt.exists() and time.time() < deadline:
            time.sleep(0.05)
        mtime = ckpt.stat().st_mtime
        # kill as a later save is under way
        while ckpt.stat().st_mtime == mtime and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.02)
    finally:
        p.kill()
        p.wait()
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["epoch"] >= 2 and "fc.weight" in state["model"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--arch", "resnet_nope"], "resnet_nope"),
        (["--evaluate"], "--evaluate needs --resume"),
        (["--device", "cuda"], "--device cuda"),
        (["--resume", "/nonexistent/ckpt.pth"], "/nonexistent/ckpt.pth"),
        (["--amp", "fp16"], "--amp fp16"),
    ],
)
def test_user_errors_exit_2_with_one_line(tiny_data, tmp_path, capsys, extra, message):
    if extra[:2] == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *tiny_data, *TINY, "--output_root", str(tmp_path), *extra])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize(
    "flag", ["--test_clips", "--eval-freq", "--print-freq", "--batch-size", "--t_length"]
)
def test_zero_counts_are_rejected_naming_the_flag(capsys, flag):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["ucf101", "a.txt", "b.txt", flag, "0"])
    assert e.value.code == 2 and f"{flag}: must be an integer >= 1" in capsys.readouterr().err


def test_missing_list_is_one_line_from_the_cli(tmp_path):
    r = run_cli(
        ["ucf101", str(tmp_path / "missing.txt"), str(tmp_path / "val.txt"), "--device", "cpu"]
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "missing.txt" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_bad_list_line_is_one_line_from_the_cli(tiny_data, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(Path(tiny_data[0]).read_text().splitlines()[0] + "\nsome_video twelve 3\n")
    r = run_cli(
        [
            "ucf101",
            str(bad),
            tiny_data[1],
            "--device",
            "cpu",
            "--data_root",
            str(Path(tiny_data[0]).parent),
        ]
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "bad.txt:2" in r.stderr, r.stderr


def test_nan_loss_stops_naming_epoch_and_iteration(tiny_data, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(
            [
                "ucf101",
                *tiny_data,
                *TINY,
                "--lr",
                "1e30",
                "--epochs",
                "2",
                "--output_root",
                str(tmp_path),
            ]
        )
    assert e.value.code == 1
    assert re.search(r"loss is (nan|inf) at epoch \d+ iteration \d+", capsys.readouterr().err)


def test_the_default_workers_fit_the_cpus_this_process_may_use(monkeypatch):
    """Default -j: 4, or fewer where fewer CPUs are ours; torch's DataLoader then has nothing to
    warn."""
    import warnings

    import features

    for cpus, want in ((1, 1), (2, 2), (16, 4)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
        args = train.get_args_parser().parse_args(["ucf101", "a.txt", "b.txt"])
        feats = features.get_parser().parse_args(["x", "--out", "o", "--resume", "c"])
        assert args.workers == feats.workers == want
        loader = torch.utils.data.DataLoader(range(4), num_workers=args.workers)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loader.check_worker_number_rationality()
    assert "at most the CPUs" in " ".join(train.get_args_parser().format_help().split())


@pytest.mark.slow
def test_a_failed_start_leaves_no_run_folder_but_keeps_a_users(lists, tmp_path):
    """A run that fails before its first checkpoint removes the folder it made (holding only
    args.txt); a folder that was there before keeps everything in it."""
    bad_val = tmp_path / "val.txt"
    bad_val.write_text("no_such_folder 10 0\n")
    argv = ["ucf101", lists[0], str(bad_val), *TINY, "--epochs", "1", "--num_classes", "4"]
    out = tmp_path / "out"
    r = run_cli([*argv, "--output_root", str(out)], timeout=120)
    assert r.returncode == 2 and "no_such_folder" in r.stderr, r.stderr
    assert out.is_dir() and list(out.iterdir()) == [], list(out.iterdir())
    mine = tmp_path / "mine" / "run"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    r = run_cli([*argv, "--output_root", str(tmp_path / "mine"), "--run_name", "run"], timeout=120)
    assert r.returncode == 2 and (mine / "notes.txt").read_text() == "mine"
    empty = tmp_path / "empty" / "run"  # made by the user, empty: theirs, kept
    empty.mkdir(parents=True)
    r = run_cli([*argv, "--output_root", str(tmp_path / "empty"), "--run_name", "run"], timeout=120)
    assert r.returncode == 2 and empty.is_dir()


def test_help_names_every_other_command():
    text = " ".join(train.get_args_parser().format_help().split())
    for command in ("demo", *flags.SUBCOMMANDS):
        assert f"`train.py {command}" in text, command
