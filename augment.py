"""Clip augmentation after the transfer (--augment_device batch): the loader draws, the batch is
augmented.

data.clip_transforms's torchvision transforms (colour jitter, RandAugment, random erasing) cost the
loader about half its clip rate when they run there (`bench.py data`, rows (f)). Their draws depend
on nothing but the clip's generator and size, so the loader can make them alone and ship each clip's
parameters, a small float64 record, beside its uint8 pixels; `apply` then augments the whole batch
on the trainer's device, one torchvision kernel call per stage for all clips that drew the same
operation:

    aug = BatchAugment(data.clip_transforms(True, 2, 9, 0.4, 0.25))  # DataSpec(augment=aug)
    params = aug.draw(rng, crop)  # in load_clip, where data.apply_transforms would run
    # uint8 (B, 3, T, H, W) and (B, S, 8) -> augmented, uint8
    clips = apply(clips, params)

`draw` seeds torch exactly as data.apply_transforms does (one integer from the sample's generator,
the same torch calls in the same order as the transforms' own), so a clip gets the same operations
and the same magnitudes on either path, and `apply` runs the kernels the transforms run
(torchvision.transforms.v2 .functional, on the same memory layout): on the CPU the clips are the
loader path's bit for bit (tests/test_augment.py, every operation); on CUDA, the float kernels may
round a level differently.

A record is S stages x (operation, 7 values): colour jitter's three factors in its drawn order, then
the RandAugment operations with their signed magnitudes, then erasing's box and fill; "Identity"
where a stage does nothing (RandAugment's "Identity", erasing not drawn).

References
- E. D. Cubuk et al., "RandAugment", CVPR Workshops 2020; Z. Zhong et al., "Random Erasing Data
  Augmentation", AAAI 2020; torchvision.transforms.v2 (RandAugment, ColorJitter, RandomErasing).
"""

import torch
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

# RandAugment's operations in its own order (its draw is an index into this), then the other
# stages'. Trap: its table and its one-operation method are private (torchvision 0.29); the tests
# compare every operation with the transform itself, so a change there fails them rather than the
# clips drifting.
RA_OPS = tuple(v2.RandAugment._AUGMENTATION_SPACE)
JITTER = ("brightness", "contrast", "saturation")  # ColorJitter's fn_idx 0, 1, 2 (hue is never on)
OPS = RA_OPS + JITTER + ("erase",)
WIDTH = 8  # a stage: operation, then up to 7 values (erasing: i, j, h, w, fill R, G, B)
# applies one drawn operation: nearest interpolation, fill 0 (clip_transforms'; BatchAugment checks)
_RA = v2.RandAugment()


class BatchAugment:
    """data.clip_transforms's Compose, split: `draw` in the loader, `apply` (module level) on the
    batch."""

    def __init__(self, compose):
        self.transforms = list(compose.transforms)
        known = (v2.ColorJitter, v2.RandAugment, v2.RandomErasing)
        for t in self.transforms:
            odd = (isinstance(t, v2.ColorJitter) and t.hue is not None) or (
                isinstance(t, v2.RandAugment)
                and (t.interpolation, t._fill) != (_RA.interpolation, _RA._fill)
            )
            if not isinstance(t, known) or odd:
                raise ValueError(f"BatchAugment cannot defer {t!r}")

    def draw(self, rng, crop):
        """The sample's generator and its uint8 (T, H, W, 3) crop -> float64 (S, WIDTH) parameters:
        what data.apply_transforms(crop, compose, rng) would draw, from the same generator state (it
        takes one integer from `rng`, as apply_transforms does). The crop is only measured."""
        # data.apply_transforms's draw, first: the same torch stream
        seed = int(rng.integers(2**63))
        video = tv_tensors.Video(crop.permute(0, 3, 1, 2))
        H, W = video.shape[-2:]
        stages = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for t in self.transforms:  # v2.Compose calls them in order; only these calls draw
                if isinstance(t, v2.ColorJitter):
                    stages += _jitter_stages(t, video)
                elif isinstance(t, v2.RandAugment):
                    stages += [_ra_stage(t, H, W) for _ in range(t.num_ops)]
                else:
                    stages.append(_erase_stage(t, video))
        out = torch.zeros(len(stages), WIDTH, dtype=torch.float64)
        for row, (op, *values) in zip(out, stages):
            row[0] = OPS.index(op)
            row[1 : 1 + len(values)] = torch.tensor(values, dtype=torch.float64)
        return out


def _jitter_stages(t, video):
    p = t.make_params([video])  # ColorJitter's own draws: fn_idx = randperm(4), then the factors
    # hue off
    factors = (p["brightness_factor"], p["contrast_factor"], p["saturation_factor"], None)
    return [
        (JITTER[i], factors[i]) if factors[i] is not None else ("Identity",) for i in p["fn_idx"]
    ]


def _ra_stage(t, H, W):
    """One RandAugment operation, drawn as RandAugment.forward draws it
    (torchvision.transforms.v2)."""
    op = RA_OPS[int(torch.randint(len(RA_OPS), ()))]
    magnitudes_fn, signed = t._AUGMENTATION_SPACE[op]
    magnitudes = magnitudes_fn(t.num_magnitude_bins, H, W)
    if magnitudes is None:
        return (op, 0.0)
    magnitude = float(magnitudes[t.magnitude])
    if signed and torch.rand(()) <= 0.5:
        magnitude *= -1
    return (op, magnitude)


def _erase_stage(t, video):
    """RandomErasing.forward's draws: the coin, then make_params (a box, or none found)."""
    if torch.rand(1) >= t.p:
        return ("Identity",)
    p = t.make_params([video])
    if p["v"] is None:  # no box in 10 tries: torchvision erases nothing
        return ("Identity",)
    return ("erase", p["i"], p["j"], p["h"], p["w"], *p["v"].flatten().expand(3).tolist())


def _run(op, x, values):
    """One stage on uint8 clips (n, T, 3, H, W) that all drew (op, values): the transforms'
    kernels."""
    if op in RA_OPS:
        return _RA._apply_image_or_video_transform(
            x, op, float(values[0]), interpolation=_RA.interpolation, fill=_RA._fill
        )
    if op == "brightness":
        return TF.adjust_brightness(x, float(values[0]))
    if op == "contrast":
        return TF.adjust_contrast(x, float(values[0]))
    if op == "saturation":
        return TF.adjust_saturation(x, float(values[0]))
    i, j, h, w = (int(v) for v in values[:4])
    fill = torch.tensor(values[4:7].tolist(), device=x.device)[:, None, None]  # float32, as theirs
    return TF.erase(x, i, j, h, w, fill)


def apply(clips, params):
    """uint8 clips (B, 3, T, H, W) on any device, float64 params (B, S, WIDTH) from `draw` -> the
    clips augmented, uint8 (B, 3, T, H, W) in channels_last_3d memory (collate's). Stage by stage,
    the clips that drew the same operation and values go through one kernel call together. Each clip
    is worked on as (T, 3, H, W) over (T, H, W, 3) memory, the layout data.apply_transforms hands
    torchvision (where a kernel's order of summation follows the layout -- a convolution, a mean --
    it stays the same)."""
    x = clips.permute(0, 2, 3, 4, 1).contiguous()  # (B, T, H, W, 3)
    params = params.cpu()
    for s in range(params.shape[1]):
        rows, group = torch.unique(params[:, s], dim=0, return_inverse=True)
        for k, row in enumerate(rows):
            op = OPS[int(row[0])]
            if op == "Identity":
                continue
            idx = (group == k).nonzero().flatten().to(x.device)
            y = _run(op, x.index_select(0, idx).permute(0, 1, 4, 2, 3), row[1:])
            x.index_copy_(0, idx, y.permute(0, 1, 3, 4, 2))
    return x.permute(0, 4, 1, 2, 3)  # (B, 3, T, H, W) view of (B, T, H, W, 3) memory
