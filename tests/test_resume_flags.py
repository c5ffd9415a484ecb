# ruff: noqa: F811 -- the `lists` fixture is imported from test_train, then taken as an argument
"""Resume: a mid-epoch checkpoint continues exactly with the global batch split otherwise, and every
flag given on resume takes effect or is refused in one line naming it."""

import json
import signal
from types import SimpleNamespace

import pytest
import torch

import checkpoint
import flags
import rundir
import train
from conftest import TINY, run_dir, run_main, weights


def one_line(capsys, *needles):
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def stop_after_first_step(monkeypatch, steps):
    """train.lr_at records each batch's optimizer step; a SIGTERM arrives once step 0's batches are
    done, so the run saves mid-epoch after its first optimizer step."""
    original = train.lr_at

    def lr_at(args, step, steps_per_epoch):
        steps.append(step)
        # the first batch of step 1 is loaded: step 0 is complete and saved at its end
        if step == 1:
            raise AssertionError("the signal should have stopped the run after step 0")
        if steps.count(0) == args.iter_size:
            rundir.STOP["signal"] = signal.SIGTERM
        return original(args, step, steps_per_epoch)

    monkeypatch.setattr(train, "lr_at", lr_at)
    return original


@pytest.mark.slow
@pytest.mark.parametrize(
    "before, after",
    [
        (["-b", "2", "--iter_size", "2"], ["-b", "4"]),
        (["-b", "4"], ["-b", "1", "--iter_size", "4"]),
    ],
)
def test_mid_epoch_resume_with_the_batch_split_otherwise_is_exact(
    lists, tmp_path, monkeypatch, before, after
):
    # BN frozen: no batch statistics, so any split of a step's 4 clips gives its gradient up to
    # rounding.
    common = ["ucf101", *lists, *TINY, "--freeze_bn", "--epochs", "2"]
    run_main([*common, "-b", "4", "--output_root", str(tmp_path / "whole")])
    whole = weights(run_dir(tmp_path / "whole", common) / "checkpoint.pth")
    steps = []
    original = stop_after_first_step(monkeypatch, steps)
    out = ["--output_root", str(tmp_path / "split")]
    with pytest.raises(SystemExit) as e:
        run_main([*common, *before, *out])
    rundir.STOP["signal"] = 0
    assert e.value.code == 128 + signal.SIGTERM
    ckpt = torch.load(run_dir(tmp_path / "split", common) / "checkpoint.pth", weights_only=False)
    assert (ckpt["epoch"], ckpt["step"]) == (0, 1)
    seen = []
    monkeypatch.setattr(train, "lr_at", lambda a, s, n: seen.append(s) or original(a, s, n))
    run_main([*common, *after, *out, "--resume", "auto"])
    iter_size = int(after[after.index("--iter_size") + 1]) if "--iter_size" in after else 1
    # every lr step once, none skipped
    assert seen == [s for s in (1, 2, 3) for _ in range(iter_size)]
    resumed = weights(run_dir(tmp_path / "split", common) / "checkpoint.pth")
    for k in whole:
        assert torch.allclose(whole[k].float(), resumed[k].float(), atol=1e-6, rtol=1e-5), k


@pytest.mark.slow
def test_wd_and_momentum_given_on_resume_win_over_the_saved_optimizer(lists, tmp_path):
    args = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*args, "--epochs", "1"])
    run_main([*args, "--epochs", "2", "--resume", "auto", "--wd", "0.01", "--momentum", "0.5"])
    ckpt = torch.load(run_dir(tmp_path, args) / "checkpoint.pth", weights_only=False)
    groups = ckpt["optimizer"]["param_groups"]
    assert [(g["weight_decay"], g["momentum"]) for g in groups] == [(0.01, 0.5), (0.0, 0.5)]


@pytest.mark.slow
def test_schedule_flags_given_on_resume_take_effect(lists, tmp_path):
    args = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*args, "--epochs", "1"])
    new = ["--epochs", "3", "--lr", "0.2", "--lr_policy", "cosine", "--warmup", "2"]
    run_main([*args, *new, "--resume", "auto"])
    lines = (run_dir(tmp_path, args) / "log.jsonl").read_text().splitlines()
    got = [json.loads(line)["lr"] for line in lines]
    a = train.parse_args([*args, *new])
    assert got[1:] == pytest.approx([train.lr_at(a, 3, 2), train.lr_at(a, 5, 2)])


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--bn_bias_wd", "--freeze_bn", "--fc_only"])
@pytest.mark.parametrize("direction", ["on", "off"])
def test_toggling_an_optimizer_shaping_flag_on_resume_is_one_line(
    lists, tmp_path, capsys, flag, direction
):
    args = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*args, "--epochs", "1", *([flag] if direction == "off" else [])])
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main(
            [*args, "--epochs", "2", "--resume", "auto", *([flag] if direction == "on" else [])]
        )
    assert e.value.code == 2
    one_line(capsys, flag, "--pretrained")


def test_amp_off_to_fp16_resume_starts_a_fresh_scale(lists, tmp_path):
    # fp16 needs CUDA: the resume step itself, with an enabled GradScaler, on an --amp off
    # checkpoint.
    args = ["ucf101", *lists, *TINY, "--output_root", str(tmp_path)]
    run_main([*args, "--epochs", "1"])
    ckpt = torch.load(run_dir(tmp_path, args) / "checkpoint.pth", weights_only=False)
    assert ckpt["scaler"] == {}
    a = train.parse_args([*args, "--epochs", "2"])
    flags.check_args(a)
    a.num_classes = ckpt["args"]["num_classes"]  # build_data sets it in a run
    model = train.make_model(a)
    groups = train.param_groups(model, a)
    opt = torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum)
    net = SimpleNamespace(optimizer=opt, scaler=torch.amp.GradScaler("cpu", enabled=True))
    progress = checkpoint.Progress()
    rt = SimpleNamespace(world_size=1, rank=0)
    checkpoint.load_training_state(a, rt, net, progress, ckpt, ckpt["args"])
    assert net.scaler.is_enabled() and net.scaler.get_scale() == 2.0**16 and progress.epoch == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 needs CUDA")
def test_gpu_resume_off_to_fp16_and_back(lists, tmp_path):
    args = ["ucf101", *lists, *TINY[:-2], "--device", "cuda", "--output_root", str(tmp_path)]
    run_main([*args, "--epochs", "1"])
    run_main([*args, "--epochs", "2", "--amp", "fp16", "--resume", "auto"])
    run_main([*args, "--epochs", "3", "--resume", "auto"])
