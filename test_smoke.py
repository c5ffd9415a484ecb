"""Smoke tests, end to end and fast: the demo learns and --evaluate reproduces its best, and the
original project's launch command parses and trains. CPU only, nothing downloads.

python -m pytest -q          (the whole suite: tests/ holds the rest, one file per thing tested;
                              tests that read ../shared/data skip when it is absent)
"""

import json

from PIL import Image
import pytest
import torch
import torchvision

import flags
import train
from conftest import acc_line, run_main


@pytest.mark.slow
def test_demo_learns_motion_and_evaluate_reproduces_best(tmp_path, capsys):
    # Classes differ only in the direction of motion: a single frame carries no label information.
    out = str(tmp_path)
    best = run_main(["demo", "--output_root", out, "--device", "cpu"])
    assert best >= 90.0, f"demo reached only {best:.1f}% (chance 25%)"
    # It ends with the per-class table (the directions' names) and leaves the pictures in the run
    # folder.
    text = capsys.readouterr().out.strip().splitlines()
    start = text.index(next(line for line in text if line.startswith("class ")))
    # the table ends the output
    assert "mean class accuracy" in text[start - 1] and len(text) == start + 5
    assert {row.split()[0] for row in text[start + 1 :]} == {"right", "down", "left", "up"}
    run_dir = tmp_path / flags.run_dir_name(train.parse_args(["demo"]))
    for png, min_size in (("curves.png", (900, 300)), ("confusion_1x1.png", (500, 500))):
        with Image.open(run_dir / png) as im:
            assert im.size[0] >= min_size[0] and im.size[1] >= min_size[1], (png, im.size)
    assert torch.load(run_dir / "checkpoint.pth", weights_only=False)["class_names"] == [
        "right",
        "down",
        "left",
        "up",
    ]
    logs = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    assert [log["epoch"] for log in logs] == list(range(len(logs)))
    for key in ("epoch", "lr", "train_loss", "train_top1", "val_top1", "val_top5", "epoch_time"):
        assert key in logs[-1]
    assert max(log["val_top1"] for log in logs) == pytest.approx(best)
    capsys.readouterr()
    top1, _ = run_main(
        [
            "demo",
            "--output_root",
            out,
            "--device",
            "cpu",
            "--evaluate",
            "--resume",
            str(run_dir / "model_best.pth"),
        ]
    )
    assert acc_line(capsys.readouterr().out)[0] == pytest.approx(best, abs=1e-3)
    assert top1 == pytest.approx(best)


def test_original_launch_command_parses(tiny_data, tmp_path):
    # The original project's command verbatim; only sizes shrunk and a local 2D ResNet for
    # --pretrained.
    r18 = tmp_path / "r18.pth"
    torch.save(torchvision.models.resnet18().state_dict(), r18)
    argv = (
        (
            "ucf101 {} {} --arch resnet18_3d --dro 0.2 --mode 3D --t_length 4 --t_stride 2 "
            "--pretrained {} "
            "--epochs 1 --batch-size 4 --lr 0.001 --lr_steps 40 80 90 --workers 0 "
            "--image_tmpl img_{{:05d}}.jpg --new_size 36 --crop_size 32 --device cpu "
            "--output_root {}"
        )
        .format(*tiny_data, r18, tmp_path)
        .split()
    )
    args = train.parse_args(argv)
    assert (args.dropout, args.t_length, args.lr_steps, args.pretrained) == (
        0.2,
        4,
        [40, 80, 90],
        str(r18),
    )
    assert flags.run_dir_name(args) == "ucf101_resnet18_3d_3D_length4_stride2_dropout0.2"
    assert train.parse_args(["ucf101", "a", "b", "--pretrained"]).pretrained == "imagenet"
    train.main(args)
    ckpt = torch.load(
        tmp_path / "ucf101_resnet18_3d_3D_length4_stride2_dropout0.2" / "checkpoint.pth",
        weights_only=False,
    )
    assert ckpt["args"]["arch"] == "resnet18_3d" and ckpt["model"]["fc.weight"].shape == (101, 512)
    assert not any(k.startswith("module.") for k in ckpt["model"])
