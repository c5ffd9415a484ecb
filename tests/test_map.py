"""A fork that follows docs/forking.md comes out right: each place the map names is the one place
every path runs (the loss in every branch of the step, a clip augmentation on every decode path,
a probe kind from one table), a resume that changes the recipe says so, and --best-metric picks
model_best.pth by the number it names."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import augment
import checkpoint
import data
import flags
import gpudecode
import probe
import train
from conftest import TINY, cuda, logs, one_line_error, run_dir, run_main


# ---- the loss: one place, every branch of the step -----------------------------------------------
def test_every_branch_of_the_step_scores_through_classification_loss(monkeypatch):
    """A loss changed in train.classification_loss is the loss of the model's logits and of each
    probe's of a --probe grid: no branch keeps a loss of its own."""
    calls = []

    def marked(args):
        def loss(logits, targets):
            calls.append(tuple(logits.shape))
            return logits.sum() * 0 + 7.0

        return loss

    monkeypatch.setattr(train, "classification_loss", marked)
    labels = torch.tensor([0, 2])
    for use_probe, logits in ((None, torch.randn(2, 3)), ("attentive", torch.randn(2, 4, 3))):
        args = SimpleNamespace(label_smoothing=0.0, probe=use_probe, multi_label=False, heads=None)
        objective = train.classification(args)
        loss = objective.loss(logits, labels, None, {})
        probes = logits.shape[1] if logits.dim() == 3 else 1
        assert float(loss) == 7.0 * probes
    assert calls == [(2, 3)] + [(2, 3)] * 4


# ---- probes: one table ---------------------------------------------------------------------------
def test_probe_kinds_are_one_table_and_an_unknown_kind_cannot_reach_training(capsys):
    parser = flags.get_args_parser()
    (action,) = [a for a in parser.actions if "--probe" in a.option_strings]
    assert list(action.choices) == list(probe.KINDS)  # the flag's choices are the table's names
    for kind in probe.KINDS:
        p = probe.make_probe(kind, 16, 3, heads=2, blocks=1, seed=0)
        assert p(torch.randn(2, 5, 16)).shape == (2, 3) and p.pooled(torch.randn(2, 5, 16)).ndim
    # a name the table lacks: refused, never a linear probe in its place
    with pytest.raises(ValueError, match="--probe mlp: unknown; choose one of: attentive, linear"):
        probe.make_probe("mlp", 16, 3, heads=2, blocks=1, seed=0)
    with pytest.raises(SystemExit) as e:
        train.parse_args(["ucf101", "a", "b", "--probe", "mlp"])
    one_line_error(capsys, "--probe", "'mlp'", exc=e)


# ---- a clip augmentation: one place, every path --------------------------------------------------
def test_a_view_augmentation_runs_on_the_loader_the_device_decode_and_the_batch_path(
    lists, monkeypatch
):
    """data.augment_view is what each path runs after the crop and flip: the loader, the device
    decode's replay (gpudecode.decode_batch, here on the CPU: the dispatch --decode_device cuda
    takes) and --augment_device batch. A mark put there (the frames inverted, drawn from the
    sample's generator) is in the clip of each."""
    original = data.augment_view

    def marked(crop, spec, rng):  # first, as a new augmentation goes
        return original(255 - crop if rng.random() < 2 else crop, spec, rng)

    kw = dict(t_length=4, t_stride=2, new_size=36, crop_size=32)
    plain = data.VideoFrameDataset(lists[0], finish_crop=True, **kw)[1][0]
    monkeypatch.setattr(data, "augment_view", marked)
    monkeypatch.setattr(data.DataSpec, "augments", property(lambda spec: True))
    clip = data.VideoFrameDataset(lists[0], **kw)[1][0]
    assert torch.equal(clip, 255 - plain)  # the loader
    encoded = data.VideoFrameDataset(lists[0], encoded=True, **kw)
    batch = gpudecode.collate_encoded([encoded[1]])
    assert isinstance(batch[0][0], gpudecode.EncodedClip)  # nothing decoded in the loader
    assert torch.equal(gpudecode.decode_batch(batch, "cpu", encoded)[0][0], clip)  # the replay
    # --augment_device batch: marked in the loader, then the transforms on the batch; the same
    # model input as the loader's transforms after the mark
    compose = data.clip_transforms(color_jitter=0.4, random_erase=1.0)
    rt = SimpleNamespace(
        device=torch.device("cpu"),
        memory_format=torch.contiguous_format,
        mean=data.MEAN,
        std=data.STD,
    )
    inputs = []
    for how in (compose, augment.BatchAugment(compose)):
        ds = data.VideoFrameDataset(lists[0], augment=how, **kw)
        inputs.append(train.to_model_input(*data.collate([ds[1]]), rt)[0])
    monkeypatch.setattr(data, "augment_view", original)
    unmarked = data.VideoFrameDataset(lists[0], augment=compose, **kw)
    assert torch.equal(inputs[0], inputs[1])
    assert not torch.equal(inputs[0], train.to_model_input(*data.collate([unmarked[1]]), rt)[0])


@cuda
def test_a_view_augmentation_runs_in_the_cuda_decode(lists, monkeypatch):
    """--decode_device cuda: nvJPEG decodes, then load_clip's replay runs data.augment_view on the
    GPU's frames: the mark is there (nvJPEG's pixels are a few levels from the CPU decoder's)."""
    original = data.augment_view
    monkeypatch.setattr(data, "augment_view", lambda c, s, r: original(255 - c, s, r))
    monkeypatch.setattr(data.DataSpec, "augments", property(lambda spec: True))
    kw = dict(t_length=4, t_stride=2, new_size=36, crop_size=32)
    clip = data.VideoFrameDataset(lists[0], **kw)[1][0].float()
    encoded = data.VideoFrameDataset(lists[0], encoded=True, **kw)
    out = gpudecode.decode_batch(gpudecode.collate_encoded([encoded[1]]), "cuda", encoded)
    got = out[0][0].float().cpu()
    assert out[0].is_cuda and (got - clip).abs().mean() < 8 < (got - (255 - clip)).abs().mean()


# ---- a resume that changes the recipe says so ----------------------------------------------------
@pytest.mark.slow
def test_a_resume_that_changes_a_recipe_flag_says_so_in_one_line_and_in_events_log(
    lists, tmp_path, capsys
):
    argv = ["ucf101", *lists, *TINY, "--epochs", "1", "--output_root", str(tmp_path)]
    run_main(argv)
    capsys.readouterr()
    run_main([*argv, "--epochs", "2", "--label-smoothing", "0.1", "--resume", "auto"])
    want = "this resume changes the recipe: --epochs 1 -> 2, --label-smoothing 0.0 -> 0.1"
    out = capsys.readouterr().out
    assert out.count(want) == 1, out
    events = (run_dir(tmp_path, argv) / "events.log").read_text().splitlines()
    assert [line for line in events if "changes the recipe" in line][0].endswith(want), events


def test_a_resume_of_the_same_recipe_says_nothing_changed():
    argv = ["ucf101", "a.txt", "b.txt", *TINY, "--epochs", "1"]
    args = train.parse_args([*argv, "--mean", "0.5", "0.5", "0.5"])
    ckpt = {"args": {**vars(args), "mean": (0.5, 0.5, 0.5), "std": (0.2, 0.2, 0.2)}}
    args.std = None  # not given: the checkpoint's own
    assert checkpoint.changed_flags(args, ckpt, flags.flag_sets()) == []
    args.lr_steps = [5]
    assert checkpoint.changed_flags(args, ckpt, flags.flag_sets()) == ["--lr_steps 2.0 -> 5"]


# ---- --best-metric -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "given, canonical",
    [
        ("top1", "top1"),
        ("val_top1:max", "top1"),
        ("mean_class_acc", "mean_class_acc"),
        ("val_loss:min", "loss"),
        ("loss:max", "loss:max"),
        ("top5:min", "top5:min"),
    ],
)
def test_best_metric_spellings(given, canonical):
    args = train.parse_args(["ucf101", "a", "b", "--best-metric", given])
    assert args.best_metric == canonical


@pytest.mark.parametrize("given", ["acc", "val_top1:up", "top1_ema"])
def test_an_unknown_best_metric_is_refused_listing_the_names(given, capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["ucf101", "a", "b", "--best-metric", given])
    one_line_error(capsys, "--best-metric", repr(given), "top1, top5, loss, mean_class_acc", exc=e)


@pytest.mark.slow
@pytest.mark.parametrize(
    "metric, key, pick",
    [("mean_class_acc", "val_mean_class_acc", max), ("val_loss:min", "val_loss", min)],
)
def test_best_metric_picks_model_best_says_so_and_a_resume_cannot_change_it(
    lists, tmp_path, capsys, metric, key, pick
):
    argv = ["ucf101", *lists, *TINY, "--epochs", "3", "--lr", "0.5", "--output_root", str(tmp_path)]
    run_main([*argv, "--best-metric", metric])
    folder = run_dir(tmp_path, argv)
    rows = logs(folder)
    values = [r[key] for r in rows]
    best_epoch = values.index(pick(values))
    ckpt = torch.load(folder / "checkpoint.pth", weights_only=False)
    best = torch.load(folder / "model_best.pth", weights_only=False)
    assert (ckpt["best_epoch"], ckpt["best_score"]) == (best_epoch, values[best_epoch])
    assert best["epoch"] == best_epoch + 1
    out = capsys.readouterr().out
    assert f"best {key} {values[best_epoch]:.3f} at epoch {best_epoch}" in out, out
    with pytest.raises(SystemExit) as e:
        run_main([*argv, "--epochs", "4", "--resume", "auto"])
    one_line_error(capsys, "was trained with --best-metric", "not top1", exc=e)


def test_mean_class_accuracy_is_the_per_class_reports():
    rng = np.random.default_rng(0)
    scores = torch.tensor(rng.random((20, 4)))
    labels = torch.tensor([0] * 11 + [1] * 5 + [2] * 3 + [3])
    res = train.scores_metrics(scores, labels)
    pred = scores.argmax(1)
    per_class = [float((pred[labels == c] == c).double().mean()) * 100 for c in range(4)]
    assert res["mean_class_acc"] == pytest.approx(np.mean(per_class))
    assert set(checkpoint.VAL_METRICS) <= set(res)  # every name --best-metric takes


def test_an_augmentation_without_dataspec_augments_is_refused(lists, monkeypatch):
    """A view augmentation that leaves DataSpec.augments off would run on a window the device still
    resizes, or (multi-scale crops for a device model) on no view at all: refused when the train
    dataset is made, in a message naming the switch."""
    original = data.augment_view

    def jitter(crop, spec, rng):
        return original(crop.flip(0) if rng.random() < 0.5 else crop, spec, rng)

    monkeypatch.setattr(data, "augment_view", jitter)
    kw = dict(t_length=4, t_stride=2, new_size=36, crop_size=32)
    with pytest.raises(ValueError, match="DataSpec.augments is off"):
        data.VideoFrameDataset(lists[0], **kw)
    data.VideoFrameDataset(lists[0], mode="val", **kw)  # val views are never augmented
    monkeypatch.setattr(data.DataSpec, "augments", property(lambda spec: True))
    data.VideoFrameDataset(lists[0], **kw)
