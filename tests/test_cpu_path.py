"""The CPU path: with the model on the CPU the loader finishes the train crop in uint8
(data.finish_box); the boxes are the device path's draws and the clips its float result within
rounding."""

import argparse

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
        # as the step: a window and its box, or (multi-scale) whole frames, the box and the size
        assert ("size" in i_dev) == (train_crop != "jitter")
        ref = data.crop_resize(
            data.normalize(c_dev[None], (0, 0, 0), (1 / 255,) * 3),
            i_dev["box"][None],
            i_dev.get("size"),
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


def test_whole_frames_of_two_sizes_make_one_batch(tmp_path):
    """Multi-scale crops for a device model: the loader ships each video's decoded frames once and
    its K boxes. Frames of two sizes in one batch are padded to the larger (last row and column
    repeated: what the border clamp reads) with the boxes rescaled, so every view equals the one cut
    from its own frames alone."""
    lists = [
        prepare.make_synth(tmp_path / name, classes=2, videos=2, frames=12, size=size)[0]
        for name, size in (("a", (97, 71)), ("b", (56, 80)))
    ]
    kw = dict(t_length=4, t_stride=2, crop_size=48, new_size=64, train_crop="multiscale13", reps=2)
    rt = argparse.Namespace(
        device=torch.device("cpu"), memory_format=torch.contiguous_format, mean=data.MEAN
    )
    rt.std = data.STD
    worst = 0.0
    for epoch in range(4):
        items = []
        for list_file in lists:
            ds = data.VideoFrameDataset(list_file, seed=1, **kw)
            ds.set_epoch(epoch)
            items += [ds[0], ds[1]]
        assert items[0][0].shape[-2:] == (71, 97) and items[2][0].shape[-2:] == (80, 56)
        # and boxes that enlarge the last pixels: their taps read past the edges, into the padding
        for (clip, _, info), (H, W) in zip(items[::2], ((71, 97), (80, 56))):
            edge = [[(H - 30) / H, (W - 30) / W, 30 / H, 30 / W], [0, 1, 1, -30 / W]]
            items.append((clip, 1, {**info, "box": torch.tensor(edge)}))
        x, y = train.to_model_input(*data.collate(items), rt)
        assert x.shape == (12, 3, 4, 48, 48) and y.tolist() == [i[1] for i in items for _ in "kk"]
        for i, item in enumerate(items):
            alone, _ = train.to_model_input(*data.collate([item]), rt)
            worst = max(worst, (x[2 * i : 2 * i + 2] - alone).abs().max().item())
    # float rounding of the rescaled boxes only (normalised units; a level is ~0.017)
    assert worst < 1e-3, worst
