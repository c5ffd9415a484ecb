# ruff: noqa: F811 -- the `lists` fixture is imported from test_train, then taken as an argument
"""Evaluation: multi-view scores, the checkpoint's normalisation reaching evaluate / resume /
predict, file names per protocol, 10-crop without flips, weight decay groups."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import checkpoint
import data
import flags
import predict
import report
import train
from conftest import TINY, run_dir, run_main, weights

# far from any weights' normalisation
ODD = ["--mean", "0.9", "0.1", "0.5", "--std", "0.05", "0.6", "0.3"]


@pytest.fixture(scope="module")
def trained(lists, tmp_path_factory):
    """A 1-epoch run trained with unusual --mean / --std: (args, its checkpoint.pth)."""
    root = tmp_path_factory.mktemp("odd")
    args = ["ucf101", *lists, *TINY, *ODD, "--epochs", "1", "--output_root", str(root)]
    run_main(args)
    return args, run_dir(root, args) / "checkpoint.pth"


def by_hand(ckpt_path, list_file, clips, crops, mean=None, std=None):
    """Each video's views scored one at a time and averaged: what evaluate must compute."""
    ckpt = torch.load(ckpt_path, weights_only=False)
    a = flags.checkpoint_args(
        ckpt, ["ucf101", "--device", "cpu", "--test_clips", str(clips), "--test_crops", str(crops)]
    )
    model = train.make_model(a)
    checkpoint.load_weights(model, ckpt, ckpt_path, a)
    model.eval()
    ds = train.make_dataset(a, list_file, "test")
    mean, std = mean or ckpt["args"]["mean"], std or ckpt["args"]["std"]
    out = []
    with torch.no_grad():
        for i in range(len(ds)):
            views = ds[i][0]
            per_view = [model(data.normalize(v[None], mean, std)).softmax(-1)[0] for v in views]
            out.append(torch.stack(per_view).mean(0))
    return torch.stack(out).numpy()


def evaluate_scores(args, ckpt, tmp_path, *flags):
    out = str(tmp_path / "eval")
    run_main(
        [
            *args[:-2],
            "--output_root",
            out,
            "--evaluate",
            "--resume",
            str(ckpt),
            "--save_scores",
            *flags,
        ]
    )
    (path,) = run_dir(out, args).glob("scores_*.npz")
    return np.load(path)["scores"], path


@pytest.mark.slow
def test_multi_view_scores_are_the_mean_of_each_views_with_the_checkpoints_normalisation(
    trained, lists, tmp_path
):
    args, ckpt = trained
    bare = [a for a in args if a not in ODD]  # --evaluate takes the checkpoint's mean / std
    got, _ = evaluate_scores(bare, ckpt, tmp_path, "--test_clips", "2", "--test_crops", "3")
    want = by_hand(ckpt, lists[1], 2, 3)
    assert np.allclose(got, want, atol=1e-5)
    default = by_hand(ckpt, lists[1], 2, 3, data.MEAN, data.STD)
    assert not np.allclose(got, default, atol=1e-3)  # the normalisation matters for this checkpoint


@pytest.mark.slow
def test_predict_uses_the_checkpoints_normalisation(trained, lists):
    _, ckpt = trained
    model, a, _ = predict.load_checkpoint(str(ckpt), "cpu", 2, 3)
    folder = open(lists[1]).read().split()[0]
    root = str(Path(lists[1]).parent)
    with torch.no_grad():
        probs, _ = predict.predict_one(model, f"{root}/{folder}", a)
    assert np.allclose(probs.numpy(), by_hand(ckpt, lists[1], 2, 3)[0], atol=1e-5)


@pytest.mark.slow
def test_resume_keeps_the_checkpoints_normalisation(trained, lists, tmp_path):
    args, _ = trained
    whole = [
        "ucf101",
        *lists,
        *TINY,
        *ODD,
        "--epochs",
        "2",
        "--output_root",
        str(tmp_path / "whole"),
    ]
    run_main(whole)
    part = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path / "part")]
    run_main([*part, *ODD, "--epochs", "1"])
    run_main([*part, "--epochs", "2", "--resume", "auto"])  # no --mean / --std: the checkpoint's
    a = weights(run_dir(tmp_path / "whole", whole) / "checkpoint.pth")
    b = weights(run_dir(tmp_path / "part", part) / "checkpoint.pth")
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.slow
def test_protocols_never_overwrite_each_other_and_save_scores_acts(trained, tmp_path):
    args, ckpt = trained
    out = tmp_path / "eval"
    base = [*args[:-2], "--output_root", str(out), "--evaluate", "--resume", str(ckpt)]
    run_main(base)
    folder = run_dir(out, args)
    assert not list(folder.glob("scores_*")) and len(list(folder.glob("per_class_*.csv"))) == 1
    for given in (["--test_sampling", "pyslowfast"], ["--new_size", "40"], ["--test_clips", "2"]):
        run_main([*base, "--save_scores", *given])
    assert (
        len(list(folder.glob("per_class_*.csv"))) == 4
        and len(list(folder.glob("scores_*.npz"))) == 3
    )
    assert len(list(folder.glob("*pyslowfast*.csv"))) == 1


def test_evaluate_checks_it_can_write_before_it_evaluates(trained, tmp_path, monkeypatch, capsys):
    args, ckpt = trained
    taken = tmp_path / "a_folder"
    taken.mkdir()
    monkeypatch.setattr(
        report, "evaluation_paths", lambda run_dir, tag, s: {"per_class": str(taken)}
    )
    monkeypatch.setattr(
        train, "evaluate", lambda *a: pytest.fail("evaluated before checking its output")
    )
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main([*args[:-2], "--output_root", str(tmp_path), "--evaluate", "--resume", str(ckpt)])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and str(taken) in err, err


@pytest.mark.parametrize("flags", [["--no_flip"], ["--dataset_sthv2"]])
def test_ten_crops_without_flips_is_one_line_in_evaluate_and_predict(
    trained, lists, tmp_path, capsys, flags
):
    args, ckpt = trained
    argv = [
        *args[:-2],
        "--output_root",
        str(tmp_path),
        "--evaluate",
        "--resume",
        str(ckpt),
        "--test_crops",
        "10",
    ]
    if flags == ["--dataset_sthv2"]:
        argv[0] = "sthv2"
        argv += ["--num_classes", "101"]
    else:
        argv += flags
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "--test_crops 10" in err, err
    # predict: a checkpoint trained with flips off
    saved = torch.load(ckpt, weights_only=False)
    saved["args"] = {**saved["args"], "no_flip": True}
    torch.save(saved, tmp_path / "noflip.pth")
    with pytest.raises(predict.PredictError, match="--test_crops 10"):
        model, a, _ = predict.load_checkpoint(str(tmp_path / "noflip.pth"), "cpu", 1, 10)
        predict.one_video_dataset(str(Path(lists[1]).parent / open(lists[1]).read().split()[0]), a)


def test_weight_decay_never_reaches_bn_or_biases(lists, tmp_path):
    for decay_all in (False, True):
        a = train.parse_args(
            [
                "ucf101",
                *lists,
                *TINY,
                "--wd",
                "0.1",
                "--output_root",
                str(tmp_path),
                *(["--bn_bias_wd"] if decay_all else []),
            ]
        )
        flags.check_args(a)
        a.num_classes = 4
        rt = SimpleNamespace(
            device=torch.device("cpu"),
            memory_format=torch.contiguous_format,
            local_rank=0,
            rank=0,
            mean=None,
            std=None,
        )
        net = train.build_net(a, rt)
        before = {n: p.detach().clone() for n, p in net.bare.named_parameters()}
        for p in net.bare.parameters():
            p.grad = torch.zeros_like(p)
        for g in net.optimizer.param_groups:
            g["lr"] = 1.0
        net.optimizer.step()  # zero gradient: only weight decay moves a parameter, by lr x wd x it
        for n, p in net.bare.named_parameters():
            decayed = decay_all or p.ndim > 1
            assert torch.allclose(p, before[n] * (0.9 if decayed else 1.0)), (n, decayed)
