"""Video frame folders -> uint8 clips: list files, exact clip sampling, a decode-speed pipeline, dataset prep.

A dataset is a list file, one video per line: `<frame_dir> <num_frames> <label>` (the TSN / TSM / mmaction2
"rawframes" format; the original project's). Frame i of a video is `frame_dir/image_tmpl.format(i)`,
i = start_index .. start_index + num_frames - 1.

    ds = VideoFrameDataset("ucf101_train_split1_list.txt", mode="train")   # root = the list's folder
    clip, label, info = ds[0]            # uint8 (3, T, 224, 224); test mode: (V, 3, T, crop, crop)
    x = crop_resize(normalize(clips.to("cuda")), info["box"].to("cuda"))   # a collated train batch

    python data.py synth OUT [--classes 4 --videos 24 --frames 32 --size 340x256]
    python data.py extract VIDEOS_DIR FRAMES_DIR [--short-side 256 --quality 95 -j N]
    python data.py lists FRAMES_DIR --ucf101 SPLITS_DIR [--split 1]    (or --hmdb51 SPLITS_DIR)
    python data.py check LIST [--root R --image_tmpl T --full]

Speed (`python bench.py data`): a clip is its JPEG decodes (libjpeg-turbo), then one crop, at most one
resize and one layout change of the whole (T, H, W, 3) stack -- never a per-frame float transform, and
only the crop is resized. Decoding is the floor; the resize is most of the rest. Float conversion and
normalisation run on the device (`normalize`): a uint8 batch is 4x less to pin and copy.

References
- L. Wang et al., "Temporal Segment Networks", ECCV 2016: the frame-folder list format.
- J. Carreira, A. Zisserman, "Quo Vadis, Action Recognition?" (I3D), CVPR 2017: clips, 2D->3D inflation.
- X. Wang et al., "Non-local Neural Networks", CVPR 2018, and PySlowFast / mmaction2 (`SampleFrames`,
  `ThreeCrop`): dense clips with scale jitter [256, 320] for training; multi-view testing
  (clips spread evenly over the video x 3 crops along the long side).
- torchvision `references/video_classification`: uint8 clips, resizing on stacked tensors.
- K. Soomro et al., UCF101 (2012); H. Kuehne et al., HMDB51 (2011): the official split files.
"""
import argparse
import importlib.util
import math
import os
import re
import shutil
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

try:  # libjpeg-turbo: ~1.3x faster than Pillow's decoder on our frames
    from torchvision.io import ImageReadMode, decode_image, read_file
except ImportError:  # torchvision deprecated its image decoders in 0.29; then Pillow decodes
    decode_image = None

# torchvision >= 0.29 deprecates its image decoders (in favour of TorchCodec) and warns on every call.
# Silenced once here, for that message only: a catch_warnings() around each call costs ~3% of a clip.
warnings.filterwarnings("ignore", message="The image decoding and encoding capabilities of TorchVision",
                        category=DeprecationWarning)

MEAN = (0.485, 0.456, 0.406)  # ImageNet RGB statistics, the inflated 2D weights expect them
STD = (0.229, 0.224, 0.225)
MODES = ("train", "val", "test")


# ---- list files ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Video:
    path: str        # frame folder (root joined)
    num_frames: int
    label: int
    line: int        # 1-based line number in the list file, for error messages


def read_list(list_file, root=None, num_classes=None, problems=None):
    """Parse a list file into Videos. A bad line raises ValueError("list:LINE: what: the line"), or,
    if `problems` is a list, goes into it as (LINE, message) and is skipped (`check` reports them all).
    Only whole lines starting with '#' are comments: a frame folder may contain '#' or spaces."""
    list_file = str(list_file)
    root = os.path.dirname(os.path.abspath(list_file)) if root is None else str(root)
    videos = []
    with open(list_file, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            line = text.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.rsplit(maxsplit=2)  # the last two fields are the integers
            try:
                if len(parts) != 3:
                    raise ValueError("expected '<frame_dir> <num_frames> <label>'")
                try:
                    num_frames, label = int(parts[1]), int(parts[2])
                except ValueError:
                    raise ValueError("num_frames and label must be integers") from None
                if num_frames < 1:
                    raise ValueError(f"num_frames must be >= 1, got {num_frames}")
                if label < 0 or (num_classes is not None and label >= num_classes):
                    raise ValueError(f"label {label} outside [0, {num_classes if num_classes else 'num_classes'})")
            except ValueError as e:
                if problems is None:
                    raise ValueError(f"{list_file}:{n}: {e}: {line}") from None
                problems.append((n, f"{list_file}:{n}: {e}: {line}"))
                continue
            videos.append(Video(os.path.normpath(os.path.join(root, parts[0])), num_frames, label, n))
    if not videos and problems is None:
        raise ValueError(f"{list_file}: no videos listed")
    return videos


# ---- sampling: pure functions of (sizes, mode, rng) ----------------------------------------------
PLACEMENTS = ("ours", "pyslowfast", "mmaction2")  # where test clips go: see sample_indices


def sample_indices(num_frames, t_length, t_stride, mode, num_clips=1, rng=None, start_index=1, placement="ours"):
    """Frame numbers of the clip(s) to read: int64 array (num_clips, t_length).

    A clip is t_length frames, t_stride apart, spanning (t_length - 1) * t_stride + 1 frames.
    - train: a uniformly random start (from `rng`, a numpy Generator); num_clips independent clips.
    - val:   the centred clip (num_clips must be 1).
    - test:  num_clips clips spread evenly: the first starts at the first frame, the last ends at the
             last frame (num_clips=1: the centred clip).
    Short videos: the stride shrinks to the largest s <= t_stride whose span fits; if even stride 1
    is too long, the clip is every frame followed by repeats of the last. Frame numbers never leave
    [start_index, start_index + num_frames - 1].
    `placement` picks another zoo's val/test clips instead (train clips are always ours): "pyslowfast"
    (`_pyslowfast_clips`) or "mmaction2" (`_mmaction2_clips`); their short-video rules are theirs.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    if mode == "val" and num_clips != 1:
        raise ValueError("val mode samples one clip; use mode='test' for num_clips > 1")
    if mode != "train" and placement != "ours":
        clips = (_pyslowfast_clips if placement == "pyslowfast" else _mmaction2_clips)(
            num_frames, t_length, t_stride, num_clips)
        return clips.astype(np.int64) + start_index
    stride = t_stride
    if (t_length - 1) * stride + 1 > num_frames:
        stride = max(1, (num_frames - 1) // max(1, t_length - 1))
    offsets = np.arange(t_length) * stride
    room = max(0, num_frames - offsets[-1] - 1)  # possible starts: 0 .. room
    if mode == "train":
        if rng is None:
            raise ValueError("train sampling needs rng (a numpy Generator)")
        starts = rng.integers(0, room + 1, size=num_clips)
    elif mode == "val":
        starts = np.array([room // 2])
    else:
        starts = np.round(np.linspace(0, room, num_clips)) if num_clips > 1 else np.array([room // 2])
    idx = np.minimum(starts.astype(np.int64)[:, None] + offsets[None, :], num_frames - 1)
    return idx + start_index


def _pyslowfast_clips(num_frames, t_length, t_stride, num_clips):
    """PySlowFast's test clips (slowfast/datasets/decoder.py: get_start_end_idx with clip_idx k of
    num_clips, USE_OFFSET_SAMPLING False as in its Kinetics configs, then temporal_sampling; fps =
    target fps). Clip k spans t_length * t_stride frames from start = max(N - span, 0) * k / num_clips
    -- so the last clip ends before the video does, and num_clips=1 is the FIRST clip, not the centre.
    Its frames are torch.linspace(start, start + span - 1, t_length) (float32, so the step is a little
    over t_stride), clamped to the video and truncated to integers: short videos repeat frames."""
    span = t_length * t_stride
    delta = max(num_frames - span, 0)
    clips = [torch.linspace(delta * k / num_clips, delta * k / num_clips + span - 1, t_length)
             for k in range(num_clips)]
    return torch.stack(clips).clamp(0, num_frames - 1).long().numpy()


def _mmaction2_clips(num_frames, t_length, t_stride, num_clips):
    """mmaction2 `SampleFrames(clip_len=t_length, frame_interval=t_stride, num_clips, test_mode=True)`
    (mmaction/datasets/transforms/loading.py, 1.x: `_get_test_clips` for 3D recognizers, default
    out_of_bound_opt='loop'). The clip spans (t_length - 1) * t_stride + 1 frames; max_offset =
    max(N - span, 0); starts round(k * max_offset / (num_clips - 1)), or max_offset // 2 for one clip.
    Frames past the end wrap around to the start (modulo N). (mmaction2 0.x instead started clip k at
    int((k + 1/2) * (N - span + 1) / num_clips); 1.x changed it to the above, "aligned with PySlowFast".)"""
    span = (t_length - 1) * t_stride + 1
    max_offset = max(num_frames - span, 0)
    if num_clips > 1:
        starts = np.round(np.arange(num_clips) * (max_offset / float(num_clips - 1)))
    else:
        starts = np.array([max_offset // 2])
    idx = starts.astype(np.int64)[:, None] + np.arange(t_length)[None, :] * t_stride
    return np.mod(idx, num_frames)


def crop_boxes(height, width, mode, new_size, crop_size, num_crops=1):
    """Val/test crops: squares (y, x, side) in ORIGINAL frame pixels; each is resized to crop_size
    afterwards (train crops: `train_box`).

    Cropping first and resizing only the crop equals "resize the short side to new_size, then crop
    crop_size" (up to rounding to whole source pixels), but the resize touches crop_size^2 pixels
    per frame instead of the whole rescaled frame -- and none at all when the frames were extracted
    with short side new_size (then side == crop_size).
    - val, and test with num_crops=1: centre crop.
    - test, num_crops=3: the whole short side, three crops at the start, centre and end of the long
      side (together they see the whole frame). At crop_size 256 this is mmaction2's ThreeCrop test
      protocol. (PySlowFast's 3 crops at 256 px go through a fully convolutional head that averages
      the softmaxes of the windows its fixed pooling kernel sees: not implemented here.)
    - test, num_crops=10: the 5 distinct crops of the original project's 10-crop test (lib/transforms.py
      GroupOverSample, from GroupMultiScaleCrop.fill_fix_offset: short side scaled to new_size, then
      crop_size crops at upper-left, upper-right, lower-left, lower-right and centre, with steps of
      (scaled size - crop_size) // 4); the caller adds each one's mirror image after it.
    """
    short = min(height, width)
    side = min(short, round(crop_size * short / new_size))
    if mode in ("train", "val") or num_crops == 1:
        return [((height - side) // 2, (width - side) // 2, side)]
    if num_crops == 10:
        # the scaled frame as torchvision's Resize(new_size) makes it (long side truncated), its offsets
        sh, sw = (new_size, int(new_size * width / height)) if height <= width else (int(new_size * height / width), new_size)
        hs, ws = (sh - crop_size) // 4, (sw - crop_size) // 4
        to_y, to_x = height / sh, width / sw  # scaled -> original pixels
        return [(min(round(4 * i * hs * to_y), height - side), min(round(4 * j * ws * to_x), width - side), side)
                for i, j in ((0, 0), (0, 1), (1, 0), (1, 1), (0.5, 0.5))]
    if num_crops != 3:
        raise ValueError(f"num_crops must be 1, 3 or 10, got {num_crops}")
    starts = [0, (max(height, width) - short) // 2, max(height, width) - short]
    return [(0, s, short) if width >= height else (s, 0, short) for s in starts]


def train_box(height, width, new_size, crop_size, rng):
    """The reference training crop of a (height, width) frame as a box (y0, x0, h, w) of ORIGINAL
    frame pixels (floats; edges, so pixel k spans [k, k + 1)).

    The reference (PySlowFast slowfast/datasets/transform.py: random_short_side_scale_jitter, then
    random_crop): short side S = round(U[new_size, 1.25 * new_size]), the long side scaled to
    floor(long * S / short); then a crop_size crop at a uniformly random whole-pixel offset of that
    rescaled frame, every offset 0 .. size - crop_size allowed (PySlowFast's np.random.randint leaves
    out the last one). In original pixels that crop is this box; `train_crop` resamples only it.
    """
    S = int(round(rng.uniform(new_size, 1.25 * new_size)))
    if width < height:
        rw, rh = S, int(math.floor(height / width * S))
    else:
        rh, rw = S, int(math.floor(width / height * S))
    y, x = int(rng.integers(0, rh - crop_size + 1)), int(rng.integers(0, rw - crop_size + 1))
    sy, sx = height / rh, width / rw  # rescaled -> original pixels
    return (y * sy, x * sx, crop_size * sy, crop_size * sx)


IDENTITY_BOX = (0.0, 0.0, 1.0, 1.0)  # box (y0, x0, h, w) in fractions of the shipped window: all of it


def train_crop(frames, box, size):
    """List of N uint8 (H, W, 3) frames and a `train_box` -> (uint8 (N, size, size, 3), window box).

    Exactly one bilinear resample in total, as the reference's single rescale:
    - an upscale (box smaller than size; e.g. frames extracted at short side new_size): ship, not
      resampled, a size x size window that holds every source pixel the box's bilinear taps read, and
      return the box in fractions of that window, for `crop_resize` to cut out and enlarge, batched
      on the device. (A CPU resize of every clip costs more than a third of its decoding time.)
    - a downscale (frames bigger than needed), or taps that fit no window (the box within a pixel of
      size, ~3% of clips from short-side-new_size frames): resample the box here, from the full-
      resolution pixels (`resample_box`); the window box is the identity.
    """
    H, W, _ = frames[0].shape
    y0, x0, h, w = box
    wy, wx = _window(y0, h, size, H), _window(x0, w, size, W)
    if wy is None or wx is None:
        return resample_box(frames, box, size), IDENTITY_BOX
    crop = torch.stack([f[wy:wy + size, wx:wx + size] for f in frames])  # (N, size, size, 3)
    return crop, ((y0 - wy) / size, (x0 - wx) / size, h / size, w / size)


def _window(start, length, size, limit):
    """Start of a `size` window of a `limit`-sample axis that holds every tap with a weight of the
    `size` outputs over [start, start + length) (`_taps`, in plain floats: per-clip torch calls cost
    more than the copy), centred on them (so the taps just outside the box are real pixels, as in the
    reference); None if no window holds them."""
    first = math.floor(max(0.0, start + 0.5 * length / size - 0.5))
    end = max(0.0, start + (size - 0.5) * length / size - 0.5)  # the last output's source coordinate
    last = min(math.floor(end) + (end > math.floor(end)), limit - 1)
    if last - first + 1 > size or limit < size:
        return None
    return min(max(round((first + last + 1 - size) / 2), 0), limit - size)


def _taps(start, length, n, limit):
    """1-D bilinear taps of F.interpolate(align_corners=False) for n outputs covering [start, start +
    length) of a signal of `limit` samples: (i0, i1, weight of i1). Output i reads source coordinate
    start + (i + 0.5) * length / n - 0.5, clamped at 0; i1 stops at the last sample (ATen's
    area_pixel_compute_source_index and its bilinear kernel)."""
    c = (start + (torch.arange(n, dtype=torch.float64) + 0.5) * (length / n) - 0.5).clamp(min=0)
    i0 = c.floor().long().clamp(max=limit - 1)
    return i0, (i0 + 1).clamp(max=limit - 1), (c - i0).clamp(0, 1).float()


def resample_box(frames, box, size):
    """Frames -> uint8 (N, size, size, 3): the box (y0, x0, h, w) of original pixels resampled as
    "resize the whole frame (bilinear, align_corners=False, no antialias: PySlowFast's
    F.interpolate, mmaction2's cv2 INTER_LINEAR), then crop" would -- but only the box's pixels are
    read. Separable: rows, then columns, in float32."""
    H, W, _ = frames[0].shape
    y0, x0, h, w = box
    (r0, r1, rw), (c0, c1, cw) = _taps(y0, h, size, H), _taps(x0, w, size, W)
    left, right = int(c0[0]), int(c1[-1]) + 1
    # rows first, gathered straight from each frame's box columns (uint8; only the taps are converted)
    top = torch.stack([f[:, left:right].index_select(0, r0) for f in frames]).float()  # (N, size, w', 3)
    bottom = torch.stack([f[:, left:right].index_select(0, r1) for f in frames]).float()
    N = top.shape[0]
    rows = torch.lerp(top, bottom, rw[None, :, None, None]).view(N * size, -1)  # (N * size, w' * 3), interleaved
    # columns: gather whole RGB triplets from the flat rows (3x faster than indexing dim 2 of (.., w', 3))
    i0, i1 = ((c[:, None] - left) * 3 + torch.arange(3) for c in (c0, c1))
    out = torch.lerp(rows.index_select(1, i0.flatten()), rows.index_select(1, i1.flatten()), cw.repeat_interleave(3))
    return out.add_(0.5).to(torch.uint8).view(N, size, size, 3)  # round (values are in [0, 255])


def resized_crop(frames, box, size):
    """List of N uint8 (H, W, 3) frames -> uint8 (N, size, size, 3): the crop `box` resized to `size`,
    one batched op for the whole clip. Only the crop is ever copied out of the decoded frames.

    We stay in the decoder's interleaved (H, W, 3) layout: it is what torch's fast uint8 resize kernel
    wants (channels-last input; planar uint8 input is ~10x slower in it)."""
    y, x, side = box
    crop = torch.stack([f[y:y + side, x:x + side] for f in frames])  # (N, side, side, 3)
    if side == size:
        return crop
    # bilinear straight on uint8; antialias matters when shrinking (else aliasing), only costs enlarging
    crop = crop.permute(0, 3, 1, 2)  # (N, 3, side, side) channels-last view
    crop = F.interpolate(crop, size=(size, size), mode="bilinear", antialias=side > size, align_corners=False)
    return crop.permute(0, 2, 3, 1)  # (N, size, size, 3), contiguous again


def normalize(x, dtype=torch.float32):
    """uint8 clips (..., 3, T, H, W) on any device -> `dtype`, /255 then ImageNet mean/std per channel.
    Keeps the memory format: a batch from `collate` stays channels_last_3d."""
    if x.dtype != torch.uint8 or x.dim() < 4 or x.shape[-4] != 3:
        raise ValueError(f"normalize expects uint8 (..., 3, T, H, W), got {x.dtype} {tuple(x.shape)}")
    mean = torch.tensor(MEAN, device=x.device, dtype=dtype).view(3, 1, 1, 1) * 255
    std = torch.tensor(STD, device=x.device, dtype=dtype).view(3, 1, 1, 1) * 255
    return (x.to(dtype) - mean) / std  # == (x / 255 - MEAN) / STD


def crop_resize(x, boxes):
    """The device half of the training crop (see `train_crop`), one batched op: float (B, C, T, H, W)
    and boxes (B, 4) = (y0, x0, h, w) in fractions of H and W -> the boxes cut out and resized to
    H x W, bilinear (align_corners=False, border clamp: F.interpolate's sampling), the same for every
    frame. Identity boxes (clips the loader already finished) pass through untouched. No randomness:
    the boxes were drawn in the loader from (seed, epoch, index), so a resume repeats them exactly."""
    B = x.shape[0]
    boxes = boxes.to(device=x.device, dtype=x.dtype).view(B, 4)
    if bool((boxes == boxes.new_tensor(IDENTITY_BOX)).all()):
        return x
    y0, x0, h, w = boxes.unbind(1)
    theta = torch.zeros(B, 3, 4, device=x.device, dtype=x.dtype)  # output (x, y, t) in [-1, 1] -> input coords
    theta[:, 0, 0], theta[:, 1, 1], theta[:, 2, 2] = w, h, 1                # time maps onto itself exactly
    theta[:, 0, 3], theta[:, 1, 3] = 2 * x0 + w - 1, 2 * y0 + h - 1          # box centre, in [-1, 1] units
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)          # (B, T, H, W, 3)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def collate(batch):
    """DataLoader collate_fn: (clip, label, info) items -> (clips, labels, info). Clips arrive as
    (.., 3, T, H, W) views of (.., T, H, W, 3) memory, the decoder's layout; stacking that memory as
    it is (a plain copy, no transposition) gives a batch in channels_last_3d memory. The
    transposition, if the model wants one, runs on the device. info: torch's default_collate
    (tensors stacked, strings -> lists)."""
    clips, labels, info = torch.utils.data.default_collate([(c.movedim(-4, -1), label, i) for c, label, i in batch])
    return clips.movedim(-1, -4), labels, info  # (B, [V,] 3, T, H, W)


def decode_frame(path):
    """An image file -> uint8 (H, W, 3) tensor. Raises OSError / RuntimeError if missing or corrupt."""
    if decode_image is None:
        with Image.open(path) as img:
            return torch.from_numpy(np.array(img.convert("RGB")))
    return decode_image(read_file(path), mode=ImageReadMode.RGB).permute(1, 2, 0)  # (H, W, 3) view of HWC memory


def _why(err):
    """A decode error without torchvision's C++ source location ("decode_jpeg, /path.cpp:171, ...")."""
    return re.sub(r"^\w+, \S+:\d+, ", "", str(err))


# ---- the dataset ---------------------------------------------------------------------------------
class VideoFrameDataset(torch.utils.data.Dataset):
    """`ds[i] -> (clip, label, info)`: clip uint8 (3, T, crop, crop) in train/val mode; in test mode
    (V, 3, T, crop, crop) with V = num_clips * num_crops, clip-major (view = clip * num_crops + crop).
    info: {"bad": ""} and in train mode "box" (see `load_clip`). test_sampling: `sample_indices`'s
    placement of val/test clips ("ours", "pyslowfast", "mmaction2").

    Randomness: sample i of epoch e uses np.random.default_rng([seed, e, i]) and nothing else, so clips
    do not depend on the number of workers, their order or a resume point. (The classic trap: numpy's
    GLOBAL RNG is copied into every forked DataLoader worker, so all workers draw the same
    "random" crops; a generator per sample cannot have that problem.) Call set_epoch(e) before
    iterating: a worker only sees the epoch that the dataset had when the worker started.
    """

    def __init__(self, list_file, root=None, image_tmpl="img_{:05d}.jpg", t_length=16, t_stride=4,
                 mode="train", new_size=256, crop_size=224, num_clips=1, num_crops=1, flip=True,
                 start_index=1, num_classes=None, seed=0, test_sampling="ours"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode != "test" and (num_clips, num_crops) != (1, 1):
            raise ValueError(f"num_clips / num_crops are test-mode options (mode={mode!r})")
        if num_crops not in (1, 3, 10) or num_clips < 1:
            raise ValueError(f"need num_clips >= 1 and num_crops in (1, 3, 10), got {num_clips}, {num_crops}")
        if test_sampling not in PLACEMENTS:
            raise ValueError(f"test_sampling must be one of {PLACEMENTS}, got {test_sampling!r}")
        if t_length < 1 or t_stride < 1:
            raise ValueError(f"t_length and t_stride must be >= 1, got {t_length}, {t_stride}")
        if not 1 <= crop_size <= new_size:
            raise ValueError(f"need 1 <= crop_size <= new_size, got crop_size {crop_size}, new_size {new_size}")
        try:
            distinct = image_tmpl.format(start_index) != image_tmpl.format(start_index + 1)  # no field: one file for all
        except (IndexError, KeyError, ValueError):
            distinct = False
        if not distinct:
            raise ValueError(f"image_tmpl {image_tmpl!r} needs one integer field, like 'img_{{:05d}}.jpg'")
        self.list_file, self.image_tmpl, self.mode = str(list_file), image_tmpl, mode
        self.t_length, self.t_stride, self.new_size, self.crop_size = t_length, t_stride, new_size, crop_size
        self.num_clips, self.num_crops, self.flip, self.start_index = num_clips, num_crops, flip, start_index
        self.seed, self.epoch, self.test_sampling = seed, 0, test_sampling
        self.videos = read_list(list_file, root, num_classes)
        self.num_classes = num_classes or max(v.label for v in self.videos) + 1

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return len(self.videos)

    def frame_path(self, video, i):
        return os.path.join(video.path, self.image_tmpl.format(i))

    def _where(self, video):
        return f"video {video.path} ({self.list_file}:{video.line})"

    def load_frames(self, video, numbers):
        """Decode frames `numbers` of `video` -> list of uint8 (H, W, 3) tensors. libjpeg-turbo via
        torchvision: the fastest decoder we measured (Pillow's draft mode only pays off for >= 2x
        reductions, and little even then at q95, where entropy decoding dominates)."""
        frames = []
        for i in numbers:
            path = self.frame_path(video, int(i))
            try:
                img = decode_frame(path)
            except (OSError, RuntimeError) as e:
                if not os.path.isfile(path):
                    raise FileNotFoundError(f"missing frame {path} of {self._where(video)}") from None
                raise RuntimeError(f"unreadable frame {path} of {self._where(video)}: {_why(e)}") from None
            if frames and img.shape != frames[0].shape:
                raise RuntimeError(f"frame {path} is {tuple(img.shape)}, the first frame {tuple(frames[0].shape)}: "
                                   f"{self._where(video)}")
            frames.append(img)
        return frames

    def load_clip(self, video, rng):
        """(video, numpy Generator) -> (clip, info). Train: clip uint8 (3, T, crop, crop) and
        info["box"], the float32 (4,) box that `crop_resize` still cuts out on the device (identity
        when the clip is final). Val: (3, T, crop, crop); test: (V, 3, T, crop, crop), clip-major."""
        clips = sample_indices(video.num_frames, self.t_length, self.t_stride, self.mode,
                               self.num_clips if self.mode == "test" else 1, rng, self.start_index, self.test_sampling)
        numbers, inverse = np.unique(clips, return_inverse=True)  # decode each frame once
        frames = self.load_frames(video, numbers)
        H, W, _ = frames[0].shape
        info = {}
        if self.mode == "train":  # draws: frames, box, flip -- in this order
            crop, box = train_crop(frames, train_box(H, W, self.new_size, self.crop_size, rng), self.crop_size)
            if self.flip and rng.random() < 0.5:
                crop, box = crop.flip(-2), (box[0], 1 - box[1] - box[3], box[2], box[3])  # mirror W, and the box
            views, info["box"] = [crop], torch.tensor(box, dtype=torch.float32)
        else:
            views = [resized_crop(frames, b, self.crop_size)
                     for b in crop_boxes(H, W, self.mode, self.new_size, self.crop_size, self.num_crops)]
            if self.num_crops == 10:  # GroupOverSample's order: each crop, then its mirror image
                views = [v for crop in views for v in (crop, crop.flip(-2))]
        out = []
        for x in views:  # (N, c, c, 3)
            if not np.array_equal(numbers, clips.reshape(-1)):  # back to clip order: test clips interleave
                x = x[torch.from_numpy(inverse.reshape(-1))]  # or overlap, short videos repeat frames
            out.append(x.reshape(clips.shape[0], self.t_length, *x.shape[1:]))  # (clips, T, c, c, 3)
        x = out[0].unsqueeze(1) if len(out) == 1 else torch.stack(out, 1)  # (clips, crops, T, c, c, 3)
        # (V, 3, T, c, c) as a VIEW of the decoder's interleaved memory: no de-interleaving copy here
        # (`collate` keeps it that way; .contiguous() if you need planar memory).
        x = x.flatten(0, 1).permute(0, 4, 1, 2, 3)
        return (x if self.mode == "test" else x[0]), info

    def __getitem__(self, index):
        video = self.videos[index]
        clip, info = self.load_clip(video, np.random.default_rng([self.seed, self.epoch, index]))
        return clip, video.label, {"bad": "", **info}


# ---- synthetic data: motion is the only cue -------------------------------------------------------
def _texture(rng, h, w, octaves=(64, 16, 4)):
    """Smooth random texture with natural-image-like spectrum (noise upsampled from coarse to fine
    grids, amplitude halving), zero mean, unit std: JPEGs of it are as large as real frames'."""
    out = np.zeros((h, w), np.float32)
    for k, o in enumerate(octaves):
        noise = rng.standard_normal((h // o + 2, w // o + 2)).astype(np.float32)
        out += 0.5 ** k * np.asarray(Image.fromarray(noise, mode="F").resize((w, h), Image.BICUBIC))
    return out / (out.std() + 1e-6)


def _synth_video(rng, label, classes, frames, width, height):
    """(frames, H, W, 3) uint8: a textured patch (half the short side) crossing a fainter textured
    background in direction 2*pi*label/classes at ~short/32 px per frame. It moves inside the central
    short x short square, which every crop sees most of, wrapping around its edges from a random start:
    a single frame says nothing about the label. (Tuned so that resnet10_3d learns it from scratch at
    56 px crops in ~100 SGD steps; a smaller, faster patch or a busier background took far longer.)"""
    short = min(width, height)
    side = max(2, short // 2)
    oy, ox = (height - short) // 2, (width - short) // 2  # the central square
    bg = 110 + 15 * _texture(rng, height, width)[..., None] * rng.uniform(0.6, 1.4, 3).astype(np.float32)
    patch = rng.uniform(60, 200, 3).astype(np.float32) + 45 * _texture(rng, side, side, (16, 4))[..., None]
    angle = 2 * math.pi * label / classes
    speed = short / 32 * rng.uniform(0.75, 1.25)
    y0, x0 = rng.uniform(0, short, 2)
    out = np.empty((frames, height, width, 3), np.uint8)
    for t in range(frames):
        img = bg.copy()
        rows = oy + (round(y0 + t * speed * math.sin(angle)) + np.arange(side)) % short
        cols = ox + (round(x0 + t * speed * math.cos(angle)) + np.arange(side)) % short
        img[np.ix_(rows, cols)] = patch
        img += rng.standard_normal(img.shape, dtype=np.float32) * 2  # sensor noise: frames differ, like real ones
        out[t] = np.clip(img, 0, 255)
    return out


def make_synth(out_dir, classes=4, videos=24, frames=32, size=(340, 256), quality=95, seed=0):
    """Write `videos` train AND `videos` val frame folders (labels round-robin, so balanced) of
    `frames` JPEG frames of size (W, H), plus train.txt / val.txt (paths relative to out_dir).
    Class c = a patch moving in direction 2*pi*c/classes (1 <= classes <= 8: right, down, left, up, ...).
    Returns (train_list, val_list)."""
    if not 1 <= classes <= 8 or videos < 1 or frames < 1:
        raise ValueError(f"need 1 <= classes <= 8, videos >= 1, frames >= 1; got {classes}, {videos}, {frames}")
    width, height = size
    rng = np.random.default_rng(seed)
    lists = []
    for split in ("train", "val"):
        lines = []
        for i in range(videos):
            label, name = i % classes, f"{split}/video_{i:04d}"
            os.makedirs(os.path.join(out_dir, name), exist_ok=True)
            for t, img in enumerate(_synth_video(rng, label, classes, frames, width, height), 1):
                Image.fromarray(img).save(os.path.join(out_dir, name, f"img_{t:05d}.jpg"), quality=quality)
            lines.append(f"{name} {frames} {label}\n")
        lists.append(os.path.join(out_dir, f"{split}.txt"))
        with open(lists[-1], "w") as f:
            f.writelines(lines)
    return tuple(lists)


# ---- dataset preparation: extract, lists, check ----------------------------------------------------
VIDEO_EXTS = (".avi", ".mp4", ".mkv", ".webm", ".mov", ".m4v", ".mpg", ".mpeg", ".flv", ".3gp")


def _extract_one(job):
    """One video -> FRAMES/<name>/img_00001.jpg ... Frames go to a temporary folder that is renamed
    when complete, so an interrupted run never leaves a half folder that looks finished."""
    video, out_dir, short_side, quality = job
    import av  # optional dependency, imported where it is needed
    tmp = out_dir + ".part"
    os.makedirs(tmp, exist_ok=True)
    n = 0
    try:
        with av.open(video) as container:
            for frame in container.decode(video=0):
                img = frame.to_image()  # PIL RGB
                w, h = img.size
                if short_side and min(w, h) != short_side:
                    s = short_side / min(w, h)
                    img = img.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BILINEAR)
                n += 1
                img.save(os.path.join(tmp, f"img_{n:05d}.jpg"), quality=quality)
    except Exception as e:  # a corrupt video must not stop the other 13000
        shutil.rmtree(tmp, ignore_errors=True)
        return video, 0, f"{type(e).__name__}: {e}"
    if n == 0:
        os.rmdir(tmp)
        return video, 0, "no video frames decoded"
    os.replace(tmp, out_dir)
    return video, n, None


def extract(videos_dir, frames_dir, short_side=256, quality=95, jobs=1):
    """Every video under videos_dir -> frames_dir/<same relative path without extension>/img_%05d.jpg,
    short side resized to short_side (0: keep), in parallel over videos. Existing folders are skipped."""
    if importlib.util.find_spec("av") is None:
        raise SystemExit("data.py extract: PyAV is not installed: pip install av")
    todo, skipped = [], 0
    for dirpath, _, files in os.walk(videos_dir):
        for name in sorted(files):
            if os.path.splitext(name)[1].lower() in VIDEO_EXTS:
                rel = os.path.relpath(os.path.join(dirpath, os.path.splitext(name)[0]), videos_dir)
                out = os.path.join(frames_dir, rel)
                if os.path.isdir(out):
                    skipped += 1
                else:
                    todo.append((os.path.join(dirpath, name), out, short_side, quality))
    frames = failed = 0
    with ProcessPoolExecutor(max(1, jobs)) as pool:
        for video, n, err in pool.map(_extract_one, todo, chunksize=4) if jobs > 1 else map(_extract_one, todo):
            frames += n
            if err:
                failed += 1
                print(f"{video}: {err}", file=sys.stderr)
    print(f"extracted {len(todo) - failed} videos ({frames} frames) to {frames_dir}; "
          f"{skipped} already there, {failed} failed")
    return failed


def count_frames(folder, image_tmpl="img_{:05d}.jpg", start_index=1, names=None):
    """Frames start_index, start_index+1, ... present in folder (stops at the first gap)."""
    names = set(os.listdir(folder) if names is None else names)
    n = 0
    while image_tmpl.format(start_index + n) in names:
        n += 1
    return n


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return list(enumerate(f.read().splitlines(), 1))


def _split_entries(dataset, splits_dir, split):
    """Official split files -> (classes, {"train": [(video_name, label, "file:line")], "val": [...]})."""
    entries = {"train": [], "val": []}
    if dataset == "ucf101":
        # classInd.txt: "1 ApplyEyeMakeup" (1-based). trainlist01.txt: "ApplyEyeMakeup/v_..._c01.avi 1";
        # testlist01.txt: the same without the label. The class comes from the folder part, looked up
        # case-insensitively (UCF101 spells HandstandPushups two ways).
        ind = os.path.join(splits_dir, "classInd.txt")
        lookup = {name.lower(): int(k) - 1 for _, line in _lines(ind) if line.strip() for k, name in [line.split()]}
        for part, fname in (("train", f"trainlist0{split}.txt"), ("val", f"testlist0{split}.txt")):
            path = os.path.join(splits_dir, fname)
            for n, line in _lines(path):
                if line.strip():
                    rel = line.split()[0].replace("\\", "/")
                    cls = rel.split("/")[0].lower()
                    if cls not in lookup:
                        raise ValueError(f"{path}:{n}: class {rel.split('/')[0]!r} is not in {ind}: {line.strip()}")
                    entries[part].append((os.path.splitext(os.path.basename(rel))[0], lookup[cls], f"{path}:{n}"))
        return sorted(lookup), entries
    # HMDB51: <class>_test_split<N>.txt, lines "<video>.avi <0|1|2>": 1 train, 2 test, 0 unused. Labels
    # index the sorted class names (not the sorted file names: "sword_exercise_..." < "sword_test...").
    suffix = f"_test_split{split}.txt"
    classes = sorted(f[:-len(suffix)] for f in os.listdir(splits_dir) if f.endswith(suffix))
    if not classes:
        raise ValueError(f"no *{suffix} files in {splits_dir}")
    for label, name in enumerate(classes):
        path = os.path.join(splits_dir, name + suffix)
        for n, line in _lines(path):
            parts = line.split()
            if len(parts) == 2 and parts[1] in ("1", "2"):
                entries["train" if parts[1] == "1" else "val"].append(
                    (os.path.splitext(parts[0])[0], label, f"{path}:{n}"))
            elif parts and (len(parts) != 2 or parts[1] != "0"):
                raise ValueError(f"{path}:{n}: expected '<video> <0|1|2>': {line.strip()}")
    return classes, entries


def make_lists(frames_dir, dataset, splits_dir, split=1, out_dir=None, image_tmpl="img_{:05d}.jpg", start_index=1):
    """Write <out_dir>/<dataset>_{train,val}_split<N>_list.txt from the official splits, counting the
    frames on disk. Frame folders are found by video name anywhere under frames_dir (flat or per class).
    Paths are relative to out_dir (default: frames_dir's parent), the lists' default root."""
    out_dir = out_dir or os.path.dirname(os.path.abspath(frames_dir))
    folders = {}  # video name -> (folder, frame count)
    for dirpath, _, files in os.walk(frames_dir):
        n = count_frames(dirpath, image_tmpl, start_index, files) if files else 0
        if n:
            folders[os.path.basename(dirpath)] = (dirpath, n)
    classes, entries = _split_entries(dataset, splits_dir, split)
    written = []
    for part in ("train", "val"):
        lines, missing = [], 0
        for name, label, where in entries[part]:
            if name not in folders:
                missing += 1
                print(f"warning: {where}: no frame folder for {name} under {frames_dir}", file=sys.stderr)
                continue
            folder, n = folders[name]
            rel = os.path.relpath(folder, out_dir)
            rel = "./" + rel if rel.startswith("#") else rel  # HMDB51 has names starting with '#': not a comment
            lines.append(f"{rel} {n} {label}\n")
        path = os.path.join(out_dir, f"{dataset}_{part}_split{split}_list.txt")
        with open(path, "w") as f:
            f.writelines(lines)
        print(f"wrote {path}: {len(lines)} videos, {len(classes)} classes ({missing} without frames)")
        written.append(path)
    return written


def check(list_file, root=None, image_tmpl="img_{:05d}.jpg", start_index=1, num_classes=None, full=False):
    """Every problem of a list file and its frames, one line each with the list line; returns them.
    Checks the list syntax and labels, that every listed frame exists, and decodes the first and last
    frame of each video (full=True: every frame, and that all have one size)."""
    problems = []  # (line, message)
    videos = read_list(list_file, root, num_classes, problems)
    if not videos:
        problems.append((0, f"{list_file}: no videos listed"))
    frames = 0
    for v in videos:
        where = f"{list_file}:{v.line}"
        if not os.path.isdir(v.path):
            problems.append((v.line, f"{where}: missing folder {v.path}"))
            continue
        on_disk = count_frames(v.path, image_tmpl, start_index)
        if on_disk < v.num_frames:
            first = os.path.join(v.path, image_tmpl.format(start_index + on_disk))
            problems.append((v.line, f"{where}: {v.num_frames} frames listed, {on_disk} on disk (first missing: {first})"))
        numbers = range(start_index, start_index + min(on_disk, v.num_frames))
        size = None
        for i in (numbers if full else sorted({numbers[0], numbers[-1]}) if numbers else []):
            path = os.path.join(v.path, image_tmpl.format(i))
            try:
                img = decode_frame(path)
            except (OSError, RuntimeError) as e:
                problems.append((v.line, f"{where}: unreadable frame {path}: {_why(e)}"))
                continue
            if size is not None and img.shape != size:
                problems.append((v.line, f"{where}: frame {path} is {tuple(img.shape)}, the first {tuple(size)}"))
            size = size or img.shape
        frames += v.num_frames
    problems.sort(key=lambda p: p[0])  # in list order
    for _, message in problems:
        print(message)
    print(f"{list_file}: {len(videos)} videos, {frames} frames, {len({v.label for v in videos})} labels: "
          + (f"{len(problems)} problem(s)" if problems else "OK"))
    return [message for _, message in problems]


def main(argv=None):
    p = argparse.ArgumentParser(description="Video frame-folder datasets: make, extract, list, check.")
    sub = p.add_subparsers(dest="cmd", required=True)

    def size(text):
        m = re.fullmatch(r"(\d+)x(\d+)", text)
        if not m:
            raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT like 340x256, got {text!r}")
        return int(m.group(1)), int(m.group(2))

    s = sub.add_parser("synth", help="a small motion-only dataset of JPEG frame folders + train.txt/val.txt")
    s.add_argument("out")
    s.add_argument("--classes", type=int, default=4, help="1..8 motion directions")
    s.add_argument("--videos", type=int, default=24, help="videos per split (train and val each)")
    s.add_argument("--frames", type=int, default=32, help="frames per video")
    s.add_argument("--size", type=size, default=(340, 256), help="WIDTHxHEIGHT (default 340x256)")
    s.add_argument("--quality", type=int, default=95, help="JPEG quality")
    s.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("extract", help="video files -> JPEG frame folders (needs PyAV: pip install av)")
    e.add_argument("videos_dir")
    e.add_argument("frames_dir")
    e.add_argument("--short-side", type=int, default=256, help="resize the short side to this (0: keep)")
    e.add_argument("--quality", type=int, default=95, help="JPEG quality")
    e.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes")
    li = sub.add_parser("lists", help="train/val list files from the official UCF101 / HMDB51 splits")
    li.add_argument("frames_dir")
    g = li.add_mutually_exclusive_group(required=True)
    g.add_argument("--ucf101", metavar="SPLITS_DIR", help="folder with classInd.txt, trainlist0N.txt, testlist0N.txt")
    g.add_argument("--hmdb51", metavar="SPLITS_DIR", help="folder with <class>_test_splitN.txt")
    li.add_argument("--split", type=int, default=1, choices=(1, 2, 3))
    li.add_argument("--out", help="folder for the lists (default: FRAMES_DIR's parent)")
    c = sub.add_parser("check", help="scan a list file's videos; print every problem; exit 1 if any")
    c.add_argument("list")
    c.add_argument("--full", action="store_true", help="decode every frame (default: first and last)")
    c.add_argument("--num_classes", type=int, help="labels must be < this")
    for q in (li, c):
        q.add_argument("--image_tmpl", default="img_{:05d}.jpg", help="frame file name template")
        q.add_argument("--start_index", type=int, default=1, help="number of the first frame")
    c.add_argument("--root", help="folder the list's paths are relative to (default: the list's folder)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "synth":
            print("wrote", *make_synth(args.out, args.classes, args.videos, args.frames, args.size, args.quality, args.seed))
        elif args.cmd == "extract":
            return 1 if extract(args.videos_dir, args.frames_dir, args.short_side, args.quality, args.jobs) else 0
        elif args.cmd == "lists":
            dataset, splits = ("ucf101", args.ucf101) if args.ucf101 else ("hmdb51", args.hmdb51)
            make_lists(args.frames_dir, dataset, splits, args.split, args.out, args.image_tmpl, args.start_index)
        else:
            return 1 if check(args.list, args.root, args.image_tmpl, args.start_index, args.num_classes, args.full) else 0
    except (ValueError, OSError) as err:
        print(f"data.py {args.cmd}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
