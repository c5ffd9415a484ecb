"""augment.py (--augment_device batch): the loader's draws + the batched apply give the clips that
data.apply_transforms gives in the loader, bit for bit on the CPU, for every operation RandAugment
can draw, colour jitter and random erasing; the dataset, to_model_input and a whole training run
agree too.
"""

import collections
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torchvision.transforms import v2

import augment
import data
import train
from conftest import TINY, assert_same_weights, cuda, one_line_error, run_dir, run_main

ALL = dict(rand_augment=True, num_ops=3, magnitude=9, color_jitter=0.4, random_erase=0.5)


def crops(n, T, H, W):
    """n uint8 (T, H, W, 3) clips: noise, and every third one dim and flat (AutoContrast and
    Equalize then stretch a narrow range; a constant frame is their edge case)."""
    g = torch.Generator().manual_seed(0)
    out = [torch.randint(0, 256, (T, H, W, 3), dtype=torch.uint8, generator=g) for _ in range(n)]
    for k in range(0, n, 3):
        out[k] = out[k] // 8 + 100
    out[1][1] = 77  # one constant frame
    return out


@pytest.mark.parametrize("shape", [(4, 32, 40), (3, 17, 23)])  # sizes no vector width divides, too
@pytest.mark.parametrize("magnitude", [9, 30])
def test_batch_path_equals_the_loaders_clips_for_every_operation(shape, magnitude):
    compose = data.clip_transforms(**{**ALL, "magnitude": magnitude})
    deferred = augment.BatchAugment(compose)
    clips, ref, params, seen = crops(48, *shape), [], [], collections.Counter()
    for k, clip in enumerate(clips):
        ref.append(data.apply_transforms(clip, compose, np.random.default_rng([0, 1, k])))
        rng = np.random.default_rng([0, 1, k])
        params.append(deferred.draw(rng, clip))
        # draw takes what apply_transforms takes from the generator: the next draw (a rep's box)
        # agrees
        assert rng.random() == _after(k)
        seen.update(augment.OPS[int(op)] for op in params[-1][:, 0])
    assert set(seen) == set(augment.OPS)  # every RandAugment operation, the jitter's three, erasing
    # (B, 3, T, H, W), as collate's memory
    batch = torch.stack([c.permute(3, 0, 1, 2) for c in clips])
    out = augment.apply(batch, torch.stack(params))
    assert out.dtype == torch.uint8 and out.movedim(1, -1).is_contiguous()
    expected = torch.stack([r.permute(3, 0, 1, 2) for r in ref])
    differ = [k for k in range(len(clips)) if not torch.equal(out[k], expected[k])]
    assert not differ, f"clips {differ} differ from the loader's"
    assert not torch.equal(out, batch)  # it augments


def _after(k):
    """The generator's next draw after apply_transforms's one integer."""
    rng = np.random.default_rng([0, 1, k])
    rng.integers(2**63)
    return rng.random()


def test_the_same_operation_runs_once_for_the_clips_that_drew_it(monkeypatch):
    calls = []
    run = augment._run
    monkeypatch.setattr(augment, "_run", lambda op, x, v: calls.append(len(x)) or run(op, x, v))
    # one stage: <= 28 (op, sign) groups
    compose = data.clip_transforms(rand_augment=True, num_ops=1)
    deferred = augment.BatchAugment(compose)
    clips = crops(64, 2, 12, 12)
    params = torch.stack([deferred.draw(np.random.default_rng(k), c) for k, c in enumerate(clips)])
    augment.apply(torch.stack([c.permute(3, 0, 1, 2) for c in clips]), params)
    assert len(calls) <= 27 and max(calls) > 1


def test_the_dataset_and_to_model_input_give_the_loaders_batch(lists):
    kw = dict(t_length=4, t_stride=2, new_size=36, crop_size=32, reps=2)
    compose = data.clip_transforms(**ALL)
    loader = data.VideoFrameDataset(lists[0], augment=compose, **kw)
    batch = data.VideoFrameDataset(lists[0], augment=augment.BatchAugment(compose), **kw)
    rt = SimpleNamespace(
        device=torch.device("cpu"),
        memory_format=torch.contiguous_format,
        mean=data.MEAN,
        std=data.STD,
    )
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        batch.set_epoch(epoch)
        a = data.collate([loader[i] for i in range(4)])
        b = data.collate([batch[i] for i in range(4)])
        assert "augment" not in a[2] and b[2]["augment"].shape[:2] == (4, 2)
        assert torch.equal(a[2]["box"], b[2]["box"])  # the same draws after the augmentation's
        xa, ya = train.to_model_input(*a, rt)
        xb, yb = train.to_model_input(*b, rt)
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


@pytest.mark.slow
def test_a_training_run_is_the_same_on_either_path(lists, tmp_path):
    # -j 2 on the batch path: the draws come from each sample's generator, whichever process runs it
    recipe = ["--auto-augment", "ra", "--color-jitter", "0.4", "--random-erase", "0.5"]
    args = ["ucf101", *lists, *TINY, "--epochs", "1", "--ra-reps", "2", *recipe]
    runs = [
        [*args, "--output_root", str(tmp_path / "loader")],
        [*args, "-j", "2", "--augment_device", "batch", "--output_root", str(tmp_path / "batch")],
    ]
    for argv in runs:
        run_main(argv)
    a, b = (torch.load(run_dir(r[-1], r) / "checkpoint.pth", weights_only=False) for r in runs)
    assert_same_weights(a["model"], b["model"])


def test_augment_device_batch_without_augmentation_is_refused(lists, capsys):
    with pytest.raises(SystemExit) as exc:
        run_main(["ucf101", *lists, *TINY, "--augment_device", "batch"])
    one_line_error(capsys, "--augment_device batch", "none is on", exc=exc)


@cuda
def test_cuda_batch_augmentation_is_the_cpu_path_within_rounding():
    # On CUDA the same kernels run in float on another device: a level where a product or a mean
    # rounds the other way, a neighbour pixel where a rotated coordinate falls the other side of a
    # half.
    compose = data.clip_transforms(**ALL)
    deferred = augment.BatchAugment(compose)
    clips = crops(48, 8, 112, 112)
    params = torch.stack(
        [deferred.draw(np.random.default_rng([0, k]), c) for k, c in enumerate(clips)]
    )
    batch = torch.stack([c.permute(3, 0, 1, 2) for c in clips])
    cpu = augment.apply(batch, params)
    gpu = augment.apply(batch.cuda(), params).cpu()
    assert gpu.dtype == torch.uint8 and gpu.shape == cpu.shape
    differ = (gpu != cpu).float().mean().item()
    assert differ < 0.01 and (gpu.float() - cpu.float()).abs().mean().item() < 0.5, differ


@pytest.mark.parametrize(
    "transform",
    [
        v2.RandAugment(interpolation=v2.InterpolationMode.BILINEAR),  # apply runs clip_transforms'
        v2.ColorJitter(hue=0.1),  # hue: not among data.clip_transforms's
        v2.RandomHorizontalFlip(),
    ],
)
def test_a_transform_the_batch_path_cannot_replay_is_refused(transform):
    with pytest.raises(ValueError, match="cannot defer"):
        augment.BatchAugment(v2.Compose([transform]))
