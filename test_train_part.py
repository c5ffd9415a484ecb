import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision

import data
import train

REPO = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
# A tiny recipe: 4 frames, 32 px crops, the 4-block resnet10_3d. Seconds per epoch on 2 cores.
TINY = ["--arch", "resnet10_3d", "--t_length", "4", "--t_stride", "2", "--new_size", "36", "--crop_size", "32",
        "-b", "4", "--lr", "0.01", "--lr_steps", "2", "--dro", "0", "-j", "0", "-p", "1", "-ef", "1", "--device", "cpu"]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    train_list, val_list = data.make_synth(out, classes=4, videos=12, frames=10, size=(48, 40))
    # An odd-length val list, so a 2-process split is uneven (the case where padded samplers go wrong).
    lines = Path(val_list).read_text().splitlines()[:7]
    odd = out / "val7.txt"
    odd.write_text("\n".join(lines) + "\n")
    return str(train_list), str(odd)


def run_main(argv):
    return train.main(train.parse_args(argv))


def run_cli(argv, **kw):
    return subprocess.run([sys.executable, str(REPO / "train.py"), *argv], capture_output=True, text=True,
                          env=ENV, cwd=REPO, **kw)


def acc_line(text):
    m = re.search(r"^ \* Acc@1 ([\d.]+) Acc@5 ([\d.]+)$", text, re.M)
    assert m, text
    return float(m.group(1)), float(m.group(2))


def load_weights(path):
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_demo_learns_motion_and_evaluate_reproduces_best(tmp_path, capsys):
    # Classes differ only in the direction of motion: a single frame carries no label information.
    out = str(tmp_path)
    best = run_main(["demo", "--output_root", out, "--device", "cpu"])
    assert best >= 90.0, f"demo reached only {best:.1f}% (chance 25%)"
    run_dir = tmp_path / train.run_dir_name(train.parse_args(["demo"]))
    logs = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    assert [log["epoch"] for log in logs] == list(range(len(logs)))
    for key in ("epoch", "lr", "train_loss", "train_top1", "val_top1", "val_top5", "epoch_time"):
        assert key in logs[-1]
    assert max(log["val_top1"] for log in logs) == pytest.approx(best)
    capsys.readouterr()
    top1, _ = run_main(["demo", "--output_root", out, "--device", "cpu", "--evaluate", "--resume", str(run_dir / "model_best.pth")])
    assert acc_line(capsys.readouterr().out)[0] == pytest.approx(best, abs=1e-3)
    assert top1 == pytest.approx(best)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_resume_is_exact(tiny_data, tmp_path, workers):
    # 3 epochs in one run == 2 epochs, then --resume for the 3rd: same weights, bit for bit.
    args = ["ucf101", *tiny_data, *TINY, "-j", workers, "--dro", "0.5", "--warmup", "0.5"]
    run_main([*args, "--epochs", "3", "--output_root", str(tmp_path / "a")])
    run_main([*args, "--epochs", "2", "--output_root", str(tmp_path / "b")])
    name = train.run_dir_name(train.parse_args(args))
    run_main([*args, "--epochs", "3", "--output_root", str(tmp_path / "b"), "--resume", "auto"])
    a, b = (load_weights(tmp_path / r / name / "checkpoint.pth") for r in "ab")
    assert_same_weights(a, b)
    assert torch.load(tmp_path / "b" / name / "checkpoint.pth", weights_only=False)["epoch"] == 3


def test_original_launch_command_parses(tiny_data, tmp_path):
    # The original project's command verbatim; only sizes shrunk and a local 2D ResNet for --pretrained.
    r18 = tmp_path / "r18.pth"
    torch.save(torchvision.models.resnet18().state_dict(), r18)
    argv = ("ucf101 {} {} --arch resnet18_3d --dro 0.2 --mode 3D --t_length 4 --t_stride 2 --pretrained {} "
            "--epochs 1 --batch-size 4 --lr 0.001 --lr_steps 40 80 90 --workers 0 --image_tmpl img_{{:05d}}.jpg "
            "--new_size 36 --crop_size 32 --device cpu --output_root {}").format(*tiny_data, r18, tmp_path).split()
    args = train.parse_args(argv)
    assert (args.dropout, args.t_length, args.lr_steps, args.pretrained) == (0.2, 4, [40, 80, 90], str(r18))
    assert train.run_dir_name(args) == "ucf101_resnet18_3d_3D_length4_stride2_dropout0.2"
    assert train.parse_args(["ucf101", "a", "b", "--pretrained"]).pretrained == "imagenet"
    train.main(args)
    ckpt = torch.load(tmp_path / "ucf101_resnet18_3d_3D_length4_stride2_dropout0.2" / "checkpoint.pth", weights_only=False)
    assert ckpt["args"]["arch"] == "resnet18_3d" and ckpt["model"]["fc.weight"].shape == (101, 512)
    assert not any(k.startswith("module.") for k in ckpt["model"])


def test_ddp_trains_and_evaluates_exactly(tiny_data, tmp_path):
    # torchrun with 2 CPU processes (gloo); 7 val videos split 4 + 3 must give the single-process numbers.
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(REPO / "train.py")]
    common = ["ucf101", *tiny_data, *TINY, "--epochs", "1"]
    r = subprocess.run([*torchrun, *common, "--ddp", "--output_root", str(tmp_path / "ddp")],
                       capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 process(es)" in r.stdout and r.stdout.count("run folder") == 1  # only rank 0 prints
    ckpt = str(tmp_path / "ddp" / train.run_dir_name(train.parse_args(common)) / "checkpoint.pth")
    evaluate = [*common, "--evaluate", "--resume", ckpt, "--save_scores", "--test_clips", "2", "--test_crops", "3"]
    r2 = subprocess.run([*torchrun, *evaluate, "--ddp", "--output_root", str(tmp_path / "e2")],
                        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    assert r2.returncode == 0, r2.stderr[-3000:]
    r1 = run_cli([*evaluate, "--output_root", str(tmp_path / "e1")], timeout=300)
    assert r1.returncode == 0, r1.stderr[-3000:]
    assert acc_line(r2.stdout) == acc_line(r1.stdout)
    s1, s2 = (np.load(next((tmp_path / e).rglob("scores_2x3.npz"))) for e in ("e1", "e2"))
    assert s1["scores"].shape == (7, 101)
    assert (s1["labels"] == s2["labels"]).all() and abs(s1["scores"] - s2["scores"]).max() < 1e-5


def test_sigterm_saves_and_resumes_exactly(tiny_data, tmp_path):
    args = ["ucf101", *tiny_data, *TINY, "--epochs", "3", "--dro", "0.5"]
    name = train.run_dir_name(train.parse_args(args))
    # All three runs as subprocesses with one thread each: the same float summation order everywhere.
    assert run_cli([*args, "--output_root", str(tmp_path / "ref")]).returncode == 0
    # Interrupt a second run mid-training, then resume it from its checkpoint.
    p = subprocess.Popen([sys.executable, str(REPO / "train.py"), *args, "--output_root", str(tmp_path / "x")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    for line in p.stdout:  # wait until it is inside the second epoch's loop
        if line.startswith("epoch 1 ["):
            p.send_signal(signal.SIGTERM)
            break
    out, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "saved" in out
    ckpt = torch.load(tmp_path / "x" / name / "checkpoint.pth", weights_only=False)
    assert ckpt["epoch"] == 1 and ckpt["iter"] >= 1
    r = run_cli([*args, "--output_root", str(tmp_path / "x"), "--resume", "auto"])
    assert r.returncode == 0 and "resumed from" in r.stdout, r.stderr[-2000:]
    assert_same_weights(load_weights(tmp_path / "ref" / name / "checkpoint.pth"),
                        load_weights(tmp_path / "x" / name / "checkpoint.pth"))


def test_sigkill_leaves_a_loadable_checkpoint(tiny_data, tmp_path):
    args = ["ucf101", *tiny_data, *TINY, "--epochs", "50", "--output_root", str(tmp_path)]
    ckpt = tmp_path / train.run_dir_name(train.parse_args(args)) / "checkpoint.pth"
    p = subprocess.Popen([sys.executable, str(REPO / "train.py"), *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
    try:
        deadline = time.time() + 120
        while not ckpt.exists() and time.time() < deadline:
            time.sleep(0.05)
        mtime = ckpt.stat().st_mtime
        while ckpt.stat().st_mtime == mtime and time.time() < deadline:  # kill as a later save is under way
            time.sleep(0.01)
        time.sleep(0.02)
    finally:
        p.kill()
        p.wait()
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["epoch"] >= 2 and "fc.weight" in state["model"]


@pytest.mark.parametrize("extra, message", [
    (["--arch", "resnet_nope"], "resnet_nope"),
    (["--evaluate"], "--evaluate needs --resume"),
    (["--device", "cuda"], "--device cuda"),
    (["--resume", "/nonexistent/ckpt.pth"], "/nonexistent/ckpt.pth"),
    (["--amp", "fp16"], "--amp fp16"),
])
def test_user_errors_exit_2_with_one_line(tiny_data, tmp_path, capsys, extra, message):
    if extra[:2] == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *tiny_data, *TINY, "--output_root", str(tmp_path), *extra])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_missing_list_is_one_line_from_the_cli(tmp_path):
    r = run_cli(["ucf101", str(tmp_path / "missing.txt"), str(tmp_path / "val.txt"), "--device", "cpu"])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "missing.txt" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bad_list_line_is_one_line_from_the_cli(tiny_data, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(Path(tiny_data[0]).read_text().splitlines()[0] + "\nsome_video twelve 3\n")
    r = run_cli(["ucf101", str(bad), tiny_data[1], "--device", "cpu", "--data_root", str(Path(tiny_data[0]).parent)])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "bad.txt:2" in r.stderr, r.stderr


def test_nan_loss_stops_naming_epoch_and_iteration(tiny_data, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *tiny_data, *TINY, "--lr", "1e30", "--epochs", "2", "--output_root", str(tmp_path)])
    assert e.value.code == 1
    assert re.search(r"loss is (nan|inf) at epoch \d+ iteration \d+", capsys.readouterr().err)
