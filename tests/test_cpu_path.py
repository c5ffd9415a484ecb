"""The CPU path: with the model on the CPU the loader finishes the train crop in uint8
(data.finish_box); the boxes are the device path's draws and the clips its float result within
rounding."""

import pytest
import torch

import data
import prepare
import train
from conftest import TINY

BOXES = {"jitter": "train_box", "multiscale": "multiscale_box"}  # --train_crop -> the box it draws
DRAWS = {name: getattr(data, name) for name in BOXES.values()}  # the real ones, before any spy


@pytest.fixture(scope="module")
def frames_list(tmp_path_factory):
    # Frames larger than new_size and of an odd aspect: boxes land off the pixel grid, both rescale
    # ways.
    out = tmp_path_factory.mktemp("cpu_path")
    return str(prepare.make_synth(out, classes=2, videos=4, frames=12, size=(97, 71))[0])


def clips_and_boxes(monkeypatch, list_file, finish, new_size, train_crop="jitter"):
    drawn, draw = [], DRAWS[BOXES[train_crop]]

    def spy(*a, **k):
        drawn.append(draw(*a, **k))
        return drawn[-1]

    monkeypatch.setattr(data, BOXES[train_crop], spy)
    ds = data.VideoFrameDataset(
        list_file,
        t_length=4,
        t_stride=2,
        new_size=new_size,
        crop_size=48,
        seed=3,
        finish_crop=finish,
        train_crop=train_crop,
    )
    out = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        out += [ds[i] for i in range(len(ds))]
    return out, drawn


# 80: downscale (short side 71)
@pytest.mark.parametrize(
    "new_size, train_crop", [(48, "jitter"), (64, "jitter"), (80, "jitter"), (64, "multiscale")]
)
def test_cpu_finish_uses_the_device_paths_boxes_and_pixels(
    monkeypatch, frames_list, new_size, train_crop
):
    dev, dev_boxes = clips_and_boxes(monkeypatch, frames_list, False, new_size, train_crop)
    cpu, cpu_boxes = clips_and_boxes(monkeypatch, frames_list, True, new_size, train_crop)
    # the same draws (flips come after: same too)
    assert cpu_boxes == dev_boxes and len(dev_boxes) == 12
    worst = 0.0
    for (c_dev, y_dev, i_dev), (c_cpu, y_cpu, i_cpu) in zip(dev, cpu):
        assert y_dev == y_cpu and i_cpu["box"].tolist() == list(data.IDENTITY_BOX)
        # in uint8 levels: mean 0, std 1/255 makes normalize's output the pixel value itself
        ref = data.crop_resize(
            data.normalize(c_dev[None], (0, 0, 0), (1 / 255,) * 3), i_dev["box"][None]
        )
        got = data.normalize(c_cpu[None], (0, 0, 0), (1 / 255,) * 3)
        worst = max(worst, (ref - got).abs().max().item())
    # Measured: <= 1 level. The device result is float (or resample_box's rounded float), ours is
    # torch's uint8 kernel (fixed-point weights, then rounded): 0.5 for rounding plus < 0.5 for its
    # weights.
    assert worst <= 1.0 + 1e-3, worst


def test_a_cpu_model_gets_finished_clips(lists):  # noqa: F811
    args = train.parse_args(["demo", *lists, *TINY])
    assert train.make_dataset(args, lists[0], "train").finish_crop
    args.device = "cuda"
    assert not train.make_dataset(args, lists[0], "train").finish_crop


def test_cpu_finish_workers_0_and_2_identical(frames_list):
    batches = []
    for workers in (0, 2):
        ds = data.VideoFrameDataset(
            frames_list, t_length=4, t_stride=2, new_size=48, crop_size=48, seed=1, finish_crop=True
        )
        ds.set_epoch(2)
        batches.append(
            list(
                torch.utils.data.DataLoader(
                    ds, batch_size=2, num_workers=workers, collate_fn=data.collate
                )
            )
        )
    for (x0, y0, _), (x2, y2, _) in zip(*batches):
        assert x0.shape == (2, 3, 4, 48, 48) and torch.equal(x0, x2) and torch.equal(y0, y2)
