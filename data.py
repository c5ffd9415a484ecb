"""Frame folders and video files -> uint8 clips: list files, exact clip sampling, a decode-speed pipeline.

A dataset is a list file, one video per line: `<frame_dir> <num_frames> <label>` (the TSN / TSM / mmaction2
"rawframes" format; the original project's). Frame i of a video is `frame_dir/image_tmpl.format(i)`,
i = start_index .. start_index + num_frames - 1. A line may name a video file instead (VIDEO_FILES), as
`<video> <num_frames> <label>` or mmaction2's `<video> <label>`: its frame i is the (i - start_index)-th
frame a plain decode gives, read exactly by `open_video` (TorchCodec, else PyAV; docs/video.md).

    ds = VideoFrameDataset("ucf101_train_split1_list.txt", mode="train")   # root = the list's folder
    clip, label, info = ds[0]            # uint8 (3, T, 224, 224); test mode: (V, 3, T, crop, crop)
    x = crop_resize(normalize(clips.to("cuda")), info["box"].to("cuda"))   # a collated train batch

prepare.py makes frame folders, lists and classes files. Frames are decoded by TorchCodec (Pillow
without it); with `encoded=True` + `collate_encoded` the loader only reads files and `decode_batch` decodes
batches on the GPU (--decode_device cuda). A clip is its decodes, one crop, at most one resize.

References
- L. Wang et al., "Temporal Segment Networks", ECCV 2016: the frame-folder list format.
- J. Carreira, A. Zisserman, "Quo Vadis, Action Recognition?" (I3D), CVPR 2017: clips, 2D->3D inflation.
- X. Wang et al., "Non-local Neural Networks", CVPR 2018, and PySlowFast / mmaction2 (`SampleFrames`,
  `ThreeCrop`): dense clips with scale jitter [256, 320] for training; multi-view testing
  (clips spread evenly over the video x 3 crops along the long side).
- torchvision `references/video_classification`: uint8 clips, resizing on stacked tensors.
- TorchCodec (pytorch/torchcodec, src/torchcodec/decoders/_image_decoders.py): decode_jpeg / decode_image,
  batched nvJPEG decoding of a list of JPEGs on CUDA.
"""

import copy
import dataclasses
import functools
import io
import math
import os
import re
import threading
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

try:  # TorchCodec (>= 0.16): libjpeg-turbo on the CPU, nvJPEG on CUDA; no FFmpeg needed for images
    from torchcodec.decoders import (
        decode_image as codec_decode_image,
        decode_jpeg as codec_decode_jpeg,
    )

    _NO_CODEC = None
except (
    ImportError,
    OSError,
    RuntimeError,
) as e:  # not installed (Pillow decodes, ~1.3x slower) or broken
    codec_decode_image = codec_decode_jpeg = None
    _NO_CODEC = f"{type(e).__name__}: {e}"
    if not isinstance(
        e, ImportError
    ):  # installed but its libraries do not load (a wheel for another torch)
        warnings.warn(
            f"TorchCodec is installed but does not load ({_NO_CODEC}); decoding frames with Pillow"
        )
try:  # torchvision's decoders: deprecated in 0.29, kept as a choice for `bench.py data`
    from torchvision.io import ImageReadMode, decode_image, decode_jpeg as tv_decode_jpeg
except ImportError:
    decode_image = tv_decode_jpeg = None
try:  # PyAV's wheel bundles FFmpeg: video files work right after `pip install -r requirements.txt`
    import av
except ImportError:
    av = None
try:  # TorchCodec's video decoder needs FFmpeg's shared libraries (its wheel ships none)
    from torchcodec._core import ops as _codec_ops
    from torchcodec.decoders import VideoDecoder

    _NO_VIDEO_CODEC = (
        None if getattr(_codec_ops, "_FFMPEG_AVAILABLE", True) else "no FFmpeg libraries"
    )
except (ImportError, OSError, RuntimeError) as e:
    VideoDecoder, _NO_VIDEO_CODEC = None, f"{type(e).__name__}: {e}"

# decode_frame's decoder: "torchcodec", "torchvision" (bit-identical on JPEGs: both call libjpeg-turbo)
# or "pil"; module-level so `bench.py data` can time each (a worker keeps the value it started with).
DECODERS = ("torchcodec", "torchvision", "pil")
DECODER = "torchcodec" if codec_decode_image is not None else "pil"

# torchvision >= 0.29 deprecates its image decoders (in favour of TorchCodec) and warns on every call.
# Silenced once here, for that message only: a catch_warnings() around each call costs ~3% of a clip.
warnings.filterwarnings(
    "ignore",
    message="The image decoding and encoding capabilities of TorchVision",
    category=DeprecationWarning,
)

MEAN = (0.485, 0.456, 0.406)  # ImageNet RGB statistics, the inflated 2D weights expect them
STD = (0.229, 0.224, 0.225)
DECODE_CHUNK = (
    1 << 30
)  # decode_batch: bytes of full-size frames per batched GPU decode (1080p: ~170)
MODES = ("train", "val", "test")


# ---- list files ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Video:
    path: str  # frame folder (root joined)
    num_frames: int
    label: int
    line: int  # 1-based line number in the list file, for error messages
    list_file: str = ""  # the list it came from, for error messages


def read_text_lines(path):
    """A text file -> [(line number, line)], for list, split and class files. A UTF-8 BOM is dropped
    (Notepad writes one; U+FEFF would otherwise become part of the first path). Text that is not UTF-8
    (latin-1, a binary file) is a ValueError naming the file and the line, not a bare codec error."""
    path = str(path)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8-sig")  # utf-8-sig strips one leading BOM, if any
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 (byte 0x{raw[e.start]:02x}); save it as UTF-8"
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ValueError(f"{path}:{line}: a NUL byte: a binary file, not a text list")
    # universal newlines, as open() in text mode: a list made on Windows (CRLF) or old macOS (CR) works
    return list(enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1))


# A list line is a path, which may hold spaces, then integer columns: how many tells the line's form.
LIST_FORMS = {1: "<video> <label>", 2: "<frame_dir or video> <num_frames> <label>"}


def _columns(fields, ints):
    """What is wrong with a line of `fields` whose last `ints` are integers (none of LIST_FORMS)."""
    expected = " or ".join(f"'{form}'" for form in LIST_FORMS.values())
    if ints > max(
        LIST_FORMS
    ):  # read as the path, an extra column would surface later as a missing folder
        return f"{ints + 1} columns, expected {expected} (a path may not end in ' <integer>')"
    return "num_frames and label must be integers" if len(fields) > 2 else f"expected {expected}"


def read_list(list_file, root=None, num_classes=None, problems=None, decoder="auto"):
    """Parse a list file into Videos. A bad line raises ValueError("list:LINE: what: the line"), or,
    if `problems` is a list, goes into it as (LINE, message) and is skipped (`check` reports them all).
    A path may be a frame folder or a video file (VIDEO_FILES); `<video> <label>` lines (mmaction2's)
    have their frames counted here with `decoder` (0 if unreadable: loading it is then a BadVideo), so
    only they open a file: three-column lists open none.
    Only whole lines starting with '#' are comments: a frame folder may contain '#' or spaces (but not
    end in ' <integer>': columns are counted from the right). Backslashes in a frame folder become '/':
    a list written on Windows works here."""
    list_file = str(list_file)
    root = os.path.dirname(os.path.abspath(list_file)) if root is None else str(root)
    videos = []
    for n, text in read_text_lines(list_file):
        line = text.strip()
        if not line or line.startswith("#"):
            continue
        fields, ints = line.split(), 0
        while ints < len(fields) - 1 and re.fullmatch(r"[+-]?\d+", fields[-1 - ints]):
            ints += 1
        try:
            if ints not in LIST_FORMS:
                raise ValueError(_columns(fields, ints))
            path, *numbers = line.rsplit(maxsplit=ints)
            path = os.path.normpath(os.path.join(root, path.replace("\\", "/")))
            if ints == 1 and not is_video_file(path):  # "dir x 3": a frame folder's line gone wrong
                raise ValueError(
                    _columns(fields, ints)
                    if len(fields) > 2
                    else f"'<video> <label>' names a video file ({' '.join(VIDEO_FILES)})"
                )
            *num_frames, label = map(int, numbers)
            if num_frames and num_frames[0] < 1:
                raise ValueError(f"num_frames must be >= 1, got {num_frames[0]}")
            if label < 0 or (num_classes is not None and label >= num_classes):
                raise ValueError(f"label {label} outside [0, {num_classes or 'num_classes'})")
            num_frames = num_frames[0] if num_frames else video_frames(path, decoder)
        except ValueError as e:
            if problems is None:
                raise ValueError(f"{list_file}:{n}: {e}: {line}") from None
            problems.append((n, f"{list_file}:{n}: {e}: {line}"))
            continue
        videos.append(Video(path, num_frames, label, n, list_file))
    if not videos and problems is None:
        raise ValueError(f"{list_file}: no videos listed")
    return videos


def check_image_tmpl(image_tmpl, start_index=1):
    """The frame-name template needs one unnamed integer field, like 'img_{:05d}.jpg': without one every
    frame has the same name (counting frames would never end); a named one ('{idx:05d}') cannot be filled."""
    try:
        distinct = image_tmpl.format(start_index) != image_tmpl.format(start_index + 1)
    except (IndexError, KeyError, ValueError, TypeError, AttributeError):
        distinct = False
    if not distinct:
        raise ValueError(
            f"--image_tmpl {image_tmpl!r} needs one unnamed integer field ('img_{{:05d}}.jpg')"
        )


# ---- sampling: pure functions of (sizes, mode, rng) ----------------------------------------------
# where test clips go: see sample_indices
PLACEMENTS = ("ours", "pyslowfast", "mmaction2", "videomae", "videomae-ssv2")


def sample_indices(
    num_frames,
    t_length,
    t_stride,
    mode,
    num_clips=1,
    rng=None,
    start_index=1,
    placement="ours",
    num_segments=1,
):
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
    (`_pyslowfast_clips`), "mmaction2" (`_mmaction2_clips`), "videomae" (Kinetics, `_videomae_clips`) or
    "videomae-ssv2" (segment-based, `_videomae_ssv2_clips`); their short-video rules are theirs.
    num_segments > 1 (TSN / TSM): one snippet of t_length frames per segment, see `segment_indices`;
    then a clip is (num_segments * t_length) frames, the snippets one after the other."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    if mode == "val" and num_clips != 1:
        raise ValueError("val mode samples one clip; use mode='test' for num_clips > 1")
    if num_segments > 1:
        return (
            segment_indices(
                num_frames, t_length, t_stride, mode, num_clips, rng, placement, num_segments
            )
            + start_index
        )
    if mode != "train" and placement != "ours":
        clips = ZOO_CLIPS[placement](num_frames, t_length, t_stride, num_clips)
        return clips.astype(np.int64) + start_index
    offsets = _offsets(num_frames, t_length, t_stride)
    room = max(0, num_frames - offsets[-1] - 1)  # possible starts: 0 .. room
    if mode == "train":
        if rng is None:
            raise ValueError("train sampling needs rng (a numpy Generator)")
        starts = rng.integers(0, room + 1, size=num_clips)
    elif mode == "val":
        starts = np.array([room // 2])
    else:
        starts = (
            np.round(np.linspace(0, room, num_clips)) if num_clips > 1 else np.array([room // 2])
        )
    idx = np.minimum(starts.astype(np.int64)[:, None] + offsets[None, :], num_frames - 1)
    return idx + start_index


def _offsets(num_frames, t_length, t_stride):
    """A clip's frame offsets; short videos: the largest stride <= t_stride whose span fits, at least 1."""
    stride = t_stride
    if (t_length - 1) * stride + 1 > num_frames:
        stride = max(1, (num_frames - 1) // max(1, t_length - 1))
    return np.arange(t_length) * stride


def segment_indices(num_frames, t_length, t_stride, mode, num_clips, rng, placement, num_segments):
    """TSN's sparse sampling (Wang et al. 2016, Sec. 3.1): the snippets' possible starts (0 .. room - 1,
    room = frames left for a snippet's start; its stride shrinks on short videos as a clip's does) split
    into N = num_segments equal segments, segment k = starts [floor(k * room / N), floor((k + 1) * room /
    N)), at least one start each (a video shorter than N snippets repeats frames). 0-based
    (num_clips, N * t_length), snippet-major.
    - train: a uniformly random start inside each segment (N independent draws).
    - val / test: view j of num_clips at fraction (j + 1/2) / num_clips of every segment: one view is
      the segment centres, int(tick / 2 + tick * k) with tick = room / N, summed in that order: TSN's
      test sampling (tsn-pytorch dataset.py, _get_test_indices) and mmaction2's 2D SampleFrames test,
      so their 25-snippet test is --num_segments 25 with one view.
    - placement "mmaction2" / "pyslowfast": that zoo's num_clips * N test clips of t_length frames
      (mmaction2's 2D test is SampleFrames(clip_len=1, frame_interval=1, num_clips=N, test_mode=True)),
      view j taking clips j, j + num_clips, ...: every view spans the video."""
    if mode != "train" and placement != "ours":
        clips = ZOO_CLIPS[placement](num_frames, t_length, t_stride, num_clips * num_segments)
        return (
            clips.reshape(num_segments, num_clips, t_length)
            .transpose(1, 0, 2)
            .reshape(num_clips, -1)
        )
    offsets = _offsets(num_frames, t_length, t_stride)
    room = max(1, num_frames - int(offsets[-1]))  # starts 0 .. room - 1
    k = np.arange(num_segments)
    lo = k * room // num_segments
    if mode == "train":
        if rng is None:
            raise ValueError("train sampling needs rng (a numpy Generator)")
        hi = np.maximum((k + 1) * room // num_segments, lo + 1)
        starts = rng.integers(lo, hi)[None, :]  # (1, N); train draws one view
    else:
        # Trap: TSN's int(tick / 2.0 + tick * k) in that float order; room / N * (k + 1/2) rounds the
        # other way at exact halves (30 frames, 25 segments: segment 12 reads frame 15, not 14).
        tick = room / float(num_segments)
        views = (np.arange(num_clips)[:, None] + 0.5) / num_clips  # (V, 1); one view: 1/2
        starts = np.minimum((tick * views + tick * k[None, :]).astype(np.int64), room - 1)
    idx = np.minimum(starts[..., None] + offsets, num_frames - 1)  # (V, N, t_length)
    return idx.reshape(idx.shape[0], -1).astype(np.int64)


def _pyslowfast_clips(num_frames, t_length, t_stride, num_clips):
    """PySlowFast's test clips (slowfast/datasets/decoder.py: get_start_end_idx with clip_idx k of
    num_clips, USE_OFFSET_SAMPLING False as in its Kinetics configs, then temporal_sampling; fps =
    target fps). Clip k spans t_length * t_stride frames from start = max(N - span, 0) * k / num_clips
    -- so the last clip ends before the video does, and num_clips=1 is the FIRST clip, not the centre.
    Its frames are torch.linspace(start, start + span - 1, t_length) (float32, so the step is a little
    over t_stride), clamped to the video and truncated to integers: short videos repeat frames."""
    span = t_length * t_stride
    delta = max(num_frames - span, 0)
    clips = [
        torch.linspace(delta * k / num_clips, delta * k / num_clips + span - 1, t_length)
        for k in range(num_clips)
    ]
    return torch.stack(clips).clamp(0, num_frames - 1).long().numpy()


def _mmaction2_clips(num_frames, t_length, t_stride, num_clips):
    """mmaction2 `SampleFrames(clip_len=t_length, frame_interval=t_stride, num_clips, test_mode=True)`
    (mmaction/datasets/transforms/loading.py, 1.x `_get_test_clips`, default out_of_bound_opt='loop').
    clip_len 1 (its 2D recognizers: TSN's 25-snippet test): start k = int(k * tick + tick / 2), tick =
    N / num_clips, the segment centres of TSN's _get_test_indices. 3D recognizers: the clip spans
    (t_length - 1) * t_stride + 1 frames; max_offset = max(N - span, 0); starts round(k * max_offset /
    (num_clips - 1)), or max_offset // 2 for one clip. Frames past the end wrap around to the start
    (modulo N). (mmaction2 0.x instead started clip k at
    int((k + 1/2) * (N - span + 1) / num_clips); 1.x changed it to the above, "aligned with PySlowFast".)"""
    if t_length == 1:  # its 2D branch (clip_len 1): the segment centres, as TSN's test indices
        tick = num_frames / float(num_clips)
        starts = np.arange(num_clips) * tick + tick / 2.0
        return np.mod(starts, num_frames).astype(np.int64)[:, None]
    span = (t_length - 1) * t_stride + 1
    max_offset = max(num_frames - span, 0)
    if num_clips > 1:
        starts = np.round(np.arange(num_clips) * (max_offset / float(num_clips - 1)))
    else:
        starts = np.array([max_offset // 2])
    idx = starts.astype(np.int64)[:, None] + np.arange(t_length)[None, :] * t_stride
    return np.mod(idx, num_frames)


def _videomae_clips(num_frames, t_length, t_stride, num_clips):
    """VideoMAE's Kinetics clips (MCG-NJU/VideoMAE and OpenGVLab/VideoMAEv2 datasets.py VideoClsDataset).
    Test (num_clips > 1, --test_num_segment): the frames 0, t_stride, 2 t_stride, ... (the last repeated up
    to t_length), clip k the t_length of them from int(k * step), step = max(M - t_length, 0) /
    (num_clips - 1) for M such frames. One clip (their validation mode): converted = t_length * t_stride,
    end = (converted + N) // 2, the clip np.linspace(end - converted, end, t_length) clamped to
    [end - converted, end - 1] and truncated; a video of at most `converted` frames takes
    np.linspace(0, N, N // t_stride) padded with N, clamped to N - 1."""
    if num_clips == 1:
        converted = t_length * t_stride
        if num_frames <= converted:
            idx = np.linspace(0, num_frames, num=num_frames // t_stride)
            idx = np.concatenate((idx, np.ones(t_length - num_frames // t_stride) * num_frames))
            return np.clip(idx, 0, num_frames - 1).astype(np.int64)[None, :]
        end = (converted + num_frames) // 2
        idx = np.linspace(end - converted, end, num=t_length)
        return np.clip(idx, end - converted, end - 1).astype(np.int64)[None, :]
    frames = list(range(0, num_frames, t_stride))
    frames += frames[-1:] * (t_length - len(frames))
    step = max((len(frames) - t_length) / (num_clips - 1), 0)
    starts = [int(k * step) for k in range(num_clips)]
    return np.array([frames[s : s + t_length] for s in starts], dtype=np.int64)


def _videomae_ssv2_clips(num_frames, t_length, t_stride, num_clips):
    """VideoMAE's Something-Something v2 test clips (datasets.py SSVideoClsDataset, segment-based; the
    stride is not used): tick = N / t_length; clip v of num_clips takes int(v * tick / num_clips + tick *
    x) for x < t_length -- all clips' frames sorted together, clip v every num_clips-th from v, as
    theirs reads them."""
    tick = num_frames / float(t_length)
    every = [
        int(v * tick / num_clips + tick * x) for v in range(num_clips) for x in range(t_length)
    ]
    every = np.sort(np.array(every, dtype=np.int64))
    return np.stack([every[v::num_clips] for v in range(num_clips)])


ZOO_CLIPS = {
    "pyslowfast": _pyslowfast_clips,
    "mmaction2": _mmaction2_clips,
    "videomae": _videomae_clips,
    "videomae-ssv2": _videomae_ssv2_clips,
}


# ---- crops and transforms: uint8 frames -> clips -------------------------------------------------
def crop_boxes(height, width, mode, new_size, crop_size, num_crops=1):
    """Val/test crops: squares (y, x, side) in ORIGINAL frame pixels, each resized to crop_size later
    (train crops: `train_box`). This equals "resize the short side to new_size, then crop crop_size"
    (up to whole source pixels), but resizes only the crop -- nothing if the frames were extracted
    with short side new_size (then side == crop_size).
    - val, and test with num_crops=1: centre crop.
    - test, num_crops=3: the whole short side, three crops at the start, centre and end of the long
      side (together they see the whole frame). At crop_size 256 this is mmaction2's ThreeCrop test
      protocol. (PySlowFast's 3 crops at 256 px go through a fully convolutional head that averages
      the softmaxes of the windows its fixed pooling kernel sees: not implemented here.)
    - test, num_crops=10: the 5 distinct crops of the original project's 10-crop test (lib/transforms.py
      GroupOverSample, from GroupMultiScaleCrop.fill_fix_offset: short side scaled to new_size, then
      crop_size crops at upper-left, upper-right, lower-left, lower-right and centre, with steps of
      (scaled size - crop_size) // 4); the caller adds each one's mirror image after it."""
    short = min(height, width)
    side = min(short, round(crop_size * short / new_size))
    if mode in ("train", "val") or num_crops == 1:
        return [((height - side) // 2, (width - side) // 2, side)]
    if num_crops == 10:
        # the scaled frame as torchvision's Resize(new_size) makes it (long side truncated), its offsets
        sh, sw = (
            (new_size, int(new_size * width / height))
            if height <= width
            else (int(new_size * height / width), new_size)
        )
        hs, ws = (sh - crop_size) // 4, (sw - crop_size) // 4
        to_y, to_x = height / sh, width / sw  # scaled -> original pixels
        return [
            (
                min(round(4 * i * hs * to_y), height - side),
                min(round(4 * j * ws * to_x), width - side),
                side,
            )
            for i, j in ((0, 0), (0, 1), (1, 0), (1, 1), (0.5, 0.5))
        ]
    if num_crops != 3:
        raise ValueError(f"num_crops must be 1, 3 or 10, got {num_crops}")
    starts = [0, (max(height, width) - short) // 2, max(height, width) - short]
    return [(0, s, short) if width >= height else (s, 0, short) for s in starts]


def train_box(height, width, new_size, crop_size, rng):
    """The reference training crop of a (height, width) frame as a box (y0, x0, h, w) of ORIGINAL
    frame pixels (floats; edges, so pixel k spans [k, k + 1)). The reference (PySlowFast
    slowfast/datasets/transform.py: random_short_side_scale_jitter, then random_crop): short side
    S = round(U[new_size, 1.25 * new_size]), the long side scaled to floor(long * S / short); then a
    crop_size crop at a uniformly random whole-pixel offset of that rescaled frame, every offset
    0 .. size - crop_size allowed (PySlowFast's np.random.randint leaves out the last one). In
    original pixels that crop is this box; `train_crop` resamples only it."""
    S = int(round(rng.uniform(new_size, 1.25 * new_size)))
    if width < height:
        rw, rh = S, int(math.floor(height / width * S))
    else:
        rh, rw = S, int(math.floor(width / height * S))
    y, x = int(rng.integers(0, rh - crop_size + 1)), int(rng.integers(0, rw - crop_size + 1))
    sy, sx = height / rh, width / rw  # rescaled -> original pixels
    return (y * sy, x * sx, crop_size * sy, crop_size * sx)


MULTISCALE = (1, 0.875, 0.75, 0.66)  # TSN's GroupMultiScaleCrop scales of the short side
TRAIN_CROPS = ("jitter", "multiscale", "multiscale13")  # train_box, multiscale_box (5 / 13 places)
# (y, x) in quarters of the slack: the corners and centre; with more_fix_crop (tsn-pytorch's and
# VideoMAE's GroupMultiScaleCrop default, its pretraining crop) 8 more: the edge centres and quarter points.
FIX_PLACES = ((0, 0), (0, 4), (4, 0), (4, 4), (2, 2))
MORE_FIX_PLACES = ((2, 0), (2, 4), (4, 2), (0, 2), (1, 1), (1, 3), (3, 1), (3, 3))


def multiscale_box(height, width, new_size, crop_size, rng, more_places=False):
    """TSN's training crop (tsn-pytorch transforms.py GroupMultiScaleCrop, fix_crop with the 5 corner /
    centre offsets; mmaction2 MultiScaleCrop(scales=(1, .875, .75, .66), max_wh_scale_gap=1,
    random_crop=False)) as a `train_box` box in ORIGINAL pixels: crop height and width each a scale of
    the short side, at most one step apart in the list, at one of 5 places (corners, centre), then
    resized to crop_size x crop_size (aspect not kept). Scale-free: the box is the same fraction of the
    frame whatever its size, so new_size plays no part. more_places: at one of 13 places
    (MORE_FIX_PLACES too: MCG-NJU/VideoMAE transforms.py GroupMultiScaleCrop, more_fix_crop=True, the
    pretraining crop of its datasets.py DataAugmentationForVideoMAE)."""
    sizes = [int(min(height, width) * s) for s in MULTISCALE]
    pairs = [(h, w) for i, h in enumerate(sizes) for j, w in enumerate(sizes) if abs(i - j) <= 1]
    h, w = pairs[int(rng.integers(len(pairs)))]
    dy, dx = (height - h) // 4, (width - w) // 4
    places = FIX_PLACES + MORE_FIX_PLACES if more_places else FIX_PLACES
    y, x = places[int(rng.integers(len(places)))]
    return (float(y * dy), float(x * dx), float(h), float(w))


IDENTITY_BOX = (
    0.0,
    0.0,
    1.0,
    1.0,
)  # box (y0, x0, h, w) in fractions of the shipped window: all of it


def clip_augment(rand_augment=False, num_ops=2, magnitude=9, color_jitter=0.0, random_erase=0.0):
    """The train clips' augmentation after crop and flip (PySlowFast's AUG for MViT; torchvision's
    transforms, which take (T, C, H, W) videos): colour jitter (brightness, contrast, saturation),
    RandAugment, random erasing with probability `random_erase`, in this order; None when all are off.
    Erased boxes take the ImageNet mean colour (~0 once normalised, torchvision references' value)."""
    ops = (
        ([v2.ColorJitter(color_jitter, color_jitter, color_jitter)] if color_jitter else [])
        + ([v2.RandAugment(num_ops, magnitude)] if rand_augment else [])
        + (
            [v2.RandomErasing(random_erase, value=[round(255 * m) for m in MEAN])]
            if random_erase
            else []
        )
    )
    return v2.Compose(ops) if ops else None


def augment_clip(crop, augment, rng):
    """uint8 (N, H, W, 3) frames -> the same, `augment` applied once to the whole clip: one draw for every
    frame. torchvision's transforms draw from torch's global generator: seeded here from the sample's
    `rng`, inside fork_rng (the caller's stream is left as it was), so (seed, epoch, index) fixes them."""
    seed = int(rng.integers(2**63))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        video = augment(
            tv_tensors.Video(crop.permute(0, 3, 1, 2))
        )  # (T, C, H, W): torchvision's layout
    return video.as_subclass(torch.Tensor).permute(0, 2, 3, 1)


def train_crop(frames, box, size):
    """List of N uint8 (H, W, 3) frames and a `train_box` -> (uint8 (N, size, size, 3), window box).

    Exactly one bilinear resample in total, as the reference's single rescale:
    - an upscale (box smaller than size; e.g. frames extracted at short side new_size): ship the
      size x size window holding every pixel the box's taps read, and the box in fractions of it, for
      `crop_resize` to enlarge on the device (a CPU resize costs over a third of a clip's decoding).
    - a downscale, or taps that fit no window (~3% of clips from short-side-new_size frames):
      `resample_box` here, from the full-resolution pixels; the window box is the identity."""
    H, W, _ = frames[0].shape
    y0, x0, h, w = box
    wy, wx = _window(y0, h, size, H), _window(x0, w, size, W)
    if wy is None or wx is None:
        return resample_box(frames, box, size), IDENTITY_BOX
    crop = torch.stack([f[wy : wy + size, wx : wx + size] for f in frames])  # (N, size, size, 3)
    return crop, ((y0 - wy) / size, (x0 - wx) / size, h / size, w / size)


def finish_box(frames, box, size):
    """A CPU model's `train_box` crop, whole, in uint8 in the loader: `crop_resize`'s grid, in torch's uint8
    kernel. Trap: F.interpolate's grid starts at its input's start: see `_aligned`."""
    (a, b, n, j), (c, e, m, k) = (
        _aligned(*v, size) for v in zip(box[:2], box[2:], frames[0].shape)
    )
    x = torch.stack([f[a:b, c:e] for f in frames]).permute(
        0, 3, 1, 2
    )  # (N, 3, h, w) channels-last view
    x = F.interpolate(x, size=(n, m), mode="bilinear", align_corners=False, antialias=False)
    return x[:, :, j : j + size, k : k + size].permute(
        0, 2, 3, 1
    )  # (N, size, size, 3), the decoder's layout


def _aligned(start, length, limit, size):
    """finish_box, one axis -> input span [a, b) (a at a whole rescaled pixel), rescaled length, first j."""
    r = round(
        size * limit / length
    )  # the rescaled frame's side (train_box: length = size * limit / r)
    step = limit // math.gcd(limit, r)  # input starts the rescaled grid hits at a whole pixel
    a = step * (
        max(0, math.floor(start - 1)) // step
    )  # the first tap, start - 0.5 (+0.5 px margin)
    b = min(
        limit, -(-math.ceil(start + length + 1) // step) * step
    )  # past the last tap, as a multiple
    return a, b, (b - a) * r // limit, round(start * r / limit) - a * r // limit


def _window(start, length, size, limit):
    """Start of a `size` window of a `limit`-sample axis that holds every tap with a weight of the
    `size` outputs over [start, start + length) (`_taps`, in plain floats: per-clip torch calls cost
    more than the copy), centred on them (so the taps just outside the box are real pixels, as in the
    reference); None if no window holds them."""
    first = math.floor(max(0.0, start + 0.5 * length / size - 0.5))
    end = max(
        0.0, start + (size - 0.5) * length / size - 0.5
    )  # the last output's source coordinate
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
    # taps on the frames' device: decode_batch (--decode_device cuda) replays this on GPU-decoded frames
    dev = frames[0].device
    (r0, r1, rw), (c0, c1, cw) = (
        [t.to(dev) for t in _taps(*a)] for a in ((y0, h, size, H), (x0, w, size, W))
    )
    left, right = int(c0[0]), int(c1[-1]) + 1
    # rows first, gathered straight from each frame's box columns (uint8; only the taps are converted)
    top = torch.stack(
        [f[:, left:right].index_select(0, r0) for f in frames]
    ).float()  # (N, size, w', 3)
    bottom = torch.stack([f[:, left:right].index_select(0, r1) for f in frames]).float()
    N = top.shape[0]
    rows = torch.lerp(top, bottom, rw[None, :, None, None]).view(
        N * size, -1
    )  # (N*size, w'*3) interleaved
    # columns: gather whole RGB triplets from the flat rows (3x faster than indexing dim 2 of (.., w', 3))
    i0, i1 = ((c[:, None] - left) * 3 + torch.arange(3, device=dev) for c in (c0, c1))
    out = torch.lerp(
        rows.index_select(1, i0.flatten()),
        rows.index_select(1, i1.flatten()),
        cw.repeat_interleave(3),
    )
    return out.add_(0.5).to(torch.uint8).view(N, size, size, 3)  # round (values are in [0, 255])


def resized_crop(frames, box, size):
    """List of N uint8 (H, W, 3) frames -> uint8 (N, size, size, 3): the crop `box` resized to `size`,
    one batched op for the clip, in the decoder's interleaved layout: torch's fast uint8 resize kernel
    wants channels-last input (planar uint8 input is ~10x slower in it)."""
    y, x, side = box
    crop = torch.stack([f[y : y + side, x : x + side] for f in frames])  # (N, side, side, 3)
    if side == size:
        return crop
    # bilinear straight on uint8; antialias matters when shrinking (else aliasing), only costs enlarging
    crop = crop.permute(0, 3, 1, 2)  # (N, 3, side, side) channels-last view
    out = F.interpolate(
        crop if crop.is_cpu else crop.float(),
        size=(size, size),
        mode="bilinear",
        antialias=side > size,
        align_corners=False,
    )
    if (
        not crop.is_cpu
    ):  # CUDA has no uint8 bilinear kernel: float there, rounded back (+-1 of the CPU's)
        out = out.round_().clamp_(0, 255).to(torch.uint8)
    return out.permute(0, 2, 3, 1)  # (N, size, size, 3), contiguous again


def normalize(x, mean=MEAN, std=STD, dtype=torch.float32):
    """uint8 clips (..., 3, T, H, W) on any device -> `dtype`, /255 then (x - mean) / std per channel.
    mean/std: RGB in [0, 1], what the weights were trained with (ImageNet's for inflated 2D weights,
    0.45 / 0.225 for PySlowFast / pytorchvideo Kinetics weights: model.pretrained_info says which).
    Keeps the memory format: a batch from `collate` stays channels_last_3d. Trap (CPU): the per-channel
    broadcast is ~3x slower over channels-last memory; change a layout in uint8, before this (train.py)."""
    if x.dtype != torch.uint8 or x.dim() < 4 or x.shape[-4] != 3:
        raise ValueError(
            f"normalize expects uint8 (..., 3, T, H, W), got {x.dtype} {tuple(x.shape)}"
        )
    mean, std = _scaled(tuple(mean), tuple(std), x.device, dtype)
    return x.to(dtype).sub_(mean).div_(std)  # == (x / 255 - mean) / std; in place: no temporaries


@functools.lru_cache(maxsize=16)
def _scaled(
    mean, std, device, dtype
):  # once per device: a CUDA tensor from a list is a blocking copy
    return [torch.tensor(v, dtype=dtype).view(3, 1, 1, 1).mul(255).to(device) for v in (mean, std)]


def crop_resize(x, boxes):
    """The device half of the training crop (see `train_crop`), one batched op: float (B, C, T, H, W)
    and boxes (B, 4) = (y0, x0, h, w) in fractions of H and W -> the boxes cut out and resized to
    H x W, bilinear (align_corners=False, border clamp: F.interpolate's sampling), the same for every
    frame. Identity boxes (clips the loader already finished) pass through untouched. No randomness:
    the boxes were drawn in the loader from (seed, epoch, index), so a resume repeats them exactly."""
    B = x.shape[0]
    if bool(
        (boxes == boxes.new_tensor(IDENTITY_BOX)).all()
    ):  # pass the loader's CPU boxes: no GPU sync
        return x
    boxes = boxes.to(device=x.device, dtype=x.dtype, non_blocking=True).view(B, 4)
    y0, x0, h, w = boxes.unbind(1)
    theta = torch.zeros(
        B, 3, 4, device=x.device, dtype=x.dtype
    )  # output (x, y, t) in [-1, 1] -> input
    theta[:, 0, 0], theta[:, 1, 1], theta[:, 2, 2] = w, h, 1  # time maps onto itself exactly
    theta[:, 0, 3], theta[:, 1, 3] = 2 * x0 + w - 1, 2 * y0 + h - 1  # box centre, in [-1, 1] units
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)  # (B, T, H, W, 3)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def collate(batch):
    """DataLoader collate_fn: (clip, label, info) items -> (clips, labels, info). Clips are (.., 3, T,
    H, W) views of the decoder's (.., T, H, W, 3) memory; stacking that memory as it is (no
    transposition) gives a channels_last_3d batch. info: default_collate (strings -> lists)."""
    items = [(c.movedim(-4, -1), label, i) for c, label, i in batch]
    clips, labels, info = torch.utils.data.default_collate(items)
    return clips.movedim(-1, -4), labels, info  # (B, [V,] 3, T, H, W)


# ---- decoding: files -> uint8 frames -------------------------------------------------------------
def read_encoded(path, count=-1):
    """A file's bytes (the first `count`; -1: all) as a 1-D uint8 tensor, what decoders take; OSError."""
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8, count=count))


def is_jpeg(data):
    return (
        data.numel() >= 3 and bytes(data[:3].tolist()) == b"\xff\xd8\xff"
    )  # SOI + the next marker


def decode_frame(source, decoder=None):
    """An image file (path) or its bytes (1-D uint8 tensor) -> uint8 (H, W, 3) tensor, decoded with
    `decoder` (default: DECODER). Raises OSError / RuntimeError if missing or corrupt. TorchCodec and
    torchvision give the same pixels on JPEGs (tested), as (3, H, W) views of (H, W, 3) memory."""
    decoder = decoder or DECODER
    data = source if isinstance(source, torch.Tensor) else read_encoded(source)
    if decoder == "pil":
        with Image.open(io.BytesIO(data.numpy())) as img:
            return torch.from_numpy(np.array(img.convert("RGB")))
    if decoder == "torchcodec" and codec_decode_image is not None:
        try:  # decode_jpeg straight away: decode_image would sniff the format from the bytes again
            img = (codec_decode_jpeg if is_jpeg(data) else codec_decode_image)(data, mode="RGB")
        except (
            ValueError
        ) as e:  # "Unsupported or unrecognized image format": a corrupt file, for us
            raise RuntimeError(str(e)) from None
    elif decoder == "torchvision" and decode_image is not None:
        img = decode_image(data, mode=ImageReadMode.RGB)
    else:
        why = f" ({_NO_CODEC})" if decoder == "torchcodec" else ""
        raise ValueError(
            f"decoder {decoder!r} is not available here{why}; choose from {available_decoders()}"
        )
    if img.dim() != 3:  # an animated GIF / WebP: (N, 3, H, W)
        raise RuntimeError(f"{img.shape[0]} images in one file (an animation), expected one frame")
    return img.permute(1, 2, 0)  # (H, W, 3) view of HWC memory


def available_decoders():
    return [
        d for d, ok in zip(DECODERS, (codec_decode_image, decode_image, Image)) if ok is not None
    ]


def _size_change(frame, first):
    return f"frame is {tuple(frame.shape)}, the first frame {tuple(first.shape)}"


def _why(err):
    """A decode error without torchvision's C++ source location ("decode_jpeg, /path.cpp:171, ...")."""
    return re.sub(r"^\w+, \S+:\d+, ", "", str(err))


# ---- video files: exact frames ---------------------------------------------------------------------
VIDEO_FILES = (".mp4", ".avi", ".mkv", ".webm", ".mov")
VIDEO_DECODERS = ("auto", "torchcodec", "pyav")
_AV_ERRORS = (OSError, ValueError, RuntimeError, IndexError) + (
    (av.error.FFmpegError,) if av else ()
)


def is_video_file(path):
    return os.path.splitext(str(path))[1].lower() in VIDEO_FILES


def pick_video_decoder(choice="auto"):
    """--video_decoder -> the decoder used: TorchCodec if FFmpeg's libraries load, else PyAV."""
    if choice not in VIDEO_DECODERS:
        raise ValueError(f"--video_decoder must be one of {VIDEO_DECODERS}, got {choice!r}")
    if choice != "pyav" and VideoDecoder is not None and _NO_VIDEO_CODEC is None:
        return "torchcodec"
    if choice == "torchcodec" or av is None:
        raise ValueError(
            f"--video_decoder {choice}: TorchCodec's video decoder is not available here "
            f"({_NO_VIDEO_CODEC}): install FFmpeg's libraries or PyAV (pip install av)"
        )
    return "pyav"


def video_frames(path, decoder="auto"):
    """Frames in a video file (open_video's count: no decoding), 0 if it cannot be read."""
    try:
        return open_video(path, pick_video_decoder(decoder))[0]
    except RuntimeError:
        return 0


def open_video(source, decoder="pyav", device="cpu"):
    """A video file (path, or its bytes as a 1-D uint8 tensor) -> (num_frames, read): read(indices) ->
    list of uint8 (H, W, 3) tensors on `device`, from the file opened once. Frame k is the k-th frame a
    plain decode from the start outputs: `extract`'s img_{k+1:05d}.jpg. Failures: RuntimeError, one line.
    TorchCodec's VideoDecoder runs in exact mode: opening scans the packets (no decoding), and
    get_frames_at decodes forward from the keyframe before each run of frames, each frame once. AVI
    files always go to PyAV, counted from the first frame: AVI stores no presentation timestamps,
    FFmpeg reconstructs them, and with B-frames TorchCodec's exact mode returns the frame before the one
    asked for after a seek, and fails on the last one (tests/videos.py: h264.avi, mpeg4.avi)."""
    try:
        head = (
            source[:12].numpy()
            if isinstance(source, torch.Tensor)
            else np.fromfile(source, np.uint8, 12)
        )
        avi = head[:4].tobytes() == b"RIFF" and head[8:12].tobytes() == b"AVI "
        if decoder == "torchcodec" and not avi:
            vd = VideoDecoder(source, seek_mode="exact", dimension_order="NHWC", device=device)
            n, read = (
                vd.metadata.num_frames or 0,
                lambda need: dict(zip(need, vd.get_frames_at(need).data)),
            )
        else:
            n, read = _pyav_open(source, avi)
    except _AV_ERRORS as e:
        raise RuntimeError(" ".join(f"{type(e).__name__}: {e}".split())) from None

    def frames(indices):
        if len(indices) and (min(indices) < 0 or max(indices) >= n):
            raise RuntimeError(f"frame {max(indices) + 1} asked for, the video has {n} frames")
        try:
            got = read(sorted({int(i) for i in indices})) if len(indices) else {}
        except _AV_ERRORS as e:
            raise RuntimeError(" ".join(f"{type(e).__name__}: {e}".split())) from None
        return [torch.as_tensor(got[int(i)]).to(device) for i in indices]

    return n, frames


def _pyav_open(source, avi):
    """PyAV. Opening demuxes the video packets (no decoding): frame k is the packet with the k-th
    smallest timestamp, leaving out those an mp4 edit list discards (a plain decode drops their frames).
    A read decodes from the last keyframe at or before its first frame and takes frames by timestamp,
    which names a frame exactly (never "the frame at about this time"). Without usable timestamps
    (AVI, missing or repeated ones), or if a frame is not where they say, it counts frames from the
    start of the file, opened afresh."""
    box = [_av_open(source)]
    # One converter for the file's frames, one thread: frame.to_ndarray(format="rgb24") builds a new
    # swscale context for every frame (and may start threads), 4x the cost of the conversion itself.
    reformatter = av.video.reformatter.VideoReformatter()

    def rgb(frame):
        return reformatter.reformat(frame, format="rgb24", threads=1).to_ndarray()

    packets = [(p.pts, p.is_keyframe) for p in box[0].demux(video=0) if p.size and not p.is_discard]
    pts, keys = [t for t, _ in packets], [t for t, key in packets if key]
    timed = not avi and None not in pts and len(set(pts)) == len(pts)
    pts = sorted(pts) if timed else pts

    def read(need):  # sorted distinct indices -> {index: RGB frame}
        got, wanted = {}, {pts[k]: k for k in need} if timed else {}
        if timed:
            start = max((t for t in keys if t <= pts[need[0]]), default=pts[0])
            box[0].seek(start, backward=True, stream=box[0].streams.video[0])
            for frame in box[0].decode(video=0):
                if frame.pts in wanted:
                    got[wanted[frame.pts]] = rgb(frame)
                if len(got) == len(need) or (frame.pts or 0) > pts[need[-1]]:
                    break  # frames come out in timestamp order: one not out by now never will be
        if len(got) < len(need):
            box[0].close()
            box[0] = _av_open(source)
            decoded = zip(range(need[-1] + 1), box[0].decode(video=0))  # stops after need[-1]
            got = {k: rgb(f) for k, f in decoded if k in need}
        if len(got) < len(need):
            raise RuntimeError(f"frame {need[-1] + 1} asked for, a decode gives fewer")
        return got

    return len(pts), read


def _av_open(source):
    container = av.open(
        io.BytesIO(source.numpy().tobytes()) if isinstance(source, torch.Tensor) else source
    )
    if not container.streams.video:
        raise ValueError("no video stream")
    container.streams.video[
        0
    ].codec_context.thread_count = 1  # one core per loader worker, as TorchCodec
    return container


# ---- the dataset ---------------------------------------------------------------------------------
class BadVideo(Exception):
    """A listed video that cannot be read: its folder or a frame is missing, a frame is empty, truncated,
    undecodable, or of another size than the first. One line: "<list>:<line>: <frame path>: <reason>
    (video <folder>)". Train mode replaces such a video (VideoFrameDataset.__getitem__); val/test raise."""

    def __init__(self, video, path=None, reason=None):
        if (
            path is None
        ):  # BadVideo(text): how a DataLoader worker's exception is re-raised in the main
            # process (torch's ExceptionWrapper passes the worker's whole traceback): keep its last line
            mark = f"{type(self).__name__}: "
            lines = [ln for ln in str(video).splitlines() if mark in ln] or [str(video)]
            self.video = self.path = self.reason = None
            super().__init__(lines[-1].split(mark, 1)[-1])
            return
        self.video, self.path, self.reason = video, path, reason
        super().__init__(f"{video.list_file}:{video.line}: {path}: {reason} (video {video.path})")

    def __reduce__(
        self,
    ):  # pickled (multiprocessing): re-created with the same fields, or the same text
        return BadVideo, (
            (self.video, self.path, self.reason) if self.path is not None else (str(self),)
        )


class ReadTimeout(BadVideo):
    """A frame whose read never returned (a FIFO in its place, a stalled network mount): never replaced,
    the run ends with this one line -- the reading thread stays blocked, and the next read may block too."""

    def __reduce__(self):
        return ReadTimeout, (
            (self.video, self.path, self.reason) if self.path is not None else (str(self),)
        )


def read_files(video, paths, timeout=None, count=-1):
    """Each path's bytes (read_encoded), or the OSError its read raised. timeout (s): the reads run in a
    daemon thread; one still blocked after `timeout` raises ReadTimeout naming its file (an open() or
    read() cannot be interrupted, and a hang would stop every worker of the run silently)."""
    out = []

    def work():
        for path in paths:
            try:
                out.append(read_encoded(path, count))
            except OSError as e:
                out.append(e)

    if not timeout:
        work()
        return out
    reader = threading.Thread(
        target=work, daemon=True
    )  # daemon: a blocked one never delays the exit
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        raise ReadTimeout(
            video,
            paths[min(len(out), len(paths) - 1)],
            f"no data after --read_timeout {timeout:g} s (a FIFO? a stalled network mount?)",
        )
    return out


BAD_ATTEMPTS = 4  # train mode: replacements tried for one unreadable video before giving up


class VideoFrameDataset(torch.utils.data.Dataset):
    """`ds[i] -> (clip, label, info)`: clip uint8 (3, T, crop, crop) in train/val mode; in test mode
    (V, 3, T, crop, crop) with V = num_clips * num_crops, clip-major (view = clip * num_crops + crop).
    info: {"bad": ""} and in train mode "box" (see `load_clip`). test_sampling: `sample_indices`'s
    placement of val/test clips (PLACEMENTS).

    Randomness: sample i of epoch e uses np.random.default_rng([seed, e, i]) and nothing else, so clips
    do not depend on the number of workers, their order or a resume point (numpy's GLOBAL RNG, copied
    into every forked worker, would give all workers the same "random" crops). Call set_epoch(e)
    before iterating: a worker only sees the epoch that the dataset had when the worker started."""

    def __init__(
        self,
        list_file,
        root=None,
        image_tmpl="img_{:05d}.jpg",
        t_length=16,
        t_stride=4,
        mode="train",
        new_size=256,
        crop_size=224,
        num_clips=1,
        num_crops=1,
        flip=True,
        start_index=1,
        num_classes=None,
        seed=0,
        test_sampling="ours",
        encoded=False,
        video_decoder="auto",
        read_timeout=None,
        finish_crop=False,
        num_segments=1,
        train_crop="jitter",
        augment=None,
        reps=1,
    ):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode != "test" and (num_clips, num_crops) != (1, 1):
            raise ValueError(f"num_clips / num_crops are test-mode options (mode={mode!r})")
        if num_crops not in (1, 3, 10) or num_clips < 1:
            raise ValueError(
                f"need num_clips >= 1 and num_crops in (1, 3, 10), got {num_clips}, {num_crops}"
            )
        if (
            num_crops == 10 and not flip
        ):  # half its views are mirror images: a label naming a direction lies
            raise ValueError(
                "--test_crops 10 mirrors half of its views, but flips are off here (--no_flip, "
                "or a dataset whose labels name a direction): use --test_crops 3 or 1"
            )
        if train_crop not in TRAIN_CROPS or num_segments < 1:
            raise ValueError(
                f"need train_crop in {TRAIN_CROPS} and num_segments >= 1, got {train_crop!r}, "
                f"{num_segments}"
            )
        if test_sampling not in PLACEMENTS:
            raise ValueError(f"test_sampling must be one of {PLACEMENTS}, got {test_sampling!r}")
        if t_length < 1 or t_stride < 1:
            raise ValueError(f"t_length and t_stride must be >= 1, got {t_length}, {t_stride}")
        if not 1 <= crop_size <= new_size:
            raise ValueError(f"need 1 <= crop_size <= new_size, got {crop_size}, {new_size}")
        check_image_tmpl(image_tmpl, start_index)
        self.list_file, self.image_tmpl, self.mode = str(list_file), image_tmpl, mode
        self.t_length, self.t_stride, self.new_size, self.crop_size = (
            t_length,
            t_stride,
            new_size,
            crop_size,
        )
        self.num_clips, self.num_crops, self.flip, self.start_index = (
            num_clips,
            num_crops,
            flip,
            start_index,
        )
        self.seed, self.epoch, self.test_sampling = seed, 0, test_sampling
        self.num_segments, self.train_crop = num_segments, train_crop  # TSN: a snippet per segment
        self.read_timeout = read_timeout  # s; None: no limit (see read_files)
        self.encoded = encoded  # --decode_device: items are EncodedClips, decode_batch decodes them
        # a CPU model, or `augment` (clip_augment: the final pixels): finish_box here, uint8 (crop_resize
        # would take ~20x the time)
        self.finish_crop = finish_crop or augment is not None
        self.augment, self.reps = augment, reps if mode == "train" else 1  # reps: clips per video
        self.video_decoder = pick_video_decoder(video_decoder)  # for the list's video files, if any
        self.videos = read_list(list_file, root, num_classes, decoder=self.video_decoder)
        self.num_classes = num_classes or max(v.label for v in self.videos) + 1

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return len(self.videos)

    def frame_path(self, video, i):
        return os.path.join(video.path, self.image_tmpl.format(i))

    def load_frames(self, video, numbers):
        """Decode frames `numbers` of `video` (decode_frame) -> list of uint8 (H, W, 3) tensors.
        Any failure is a BadVideo naming the frame, the reason, the video and its list line."""
        if is_video_file(
            video.path
        ):  # a first read as frames get (a FIFO, a dead mount: read_timeout)
            read_files(
                video, [video.path], self.read_timeout, count=12
            )  # then the decoder reads the file
            return self.read_video(video, numbers)
        frames, paths = [], [self.frame_path(video, int(i)) for i in numbers]
        for path, blob in zip(paths, read_files(video, paths, self.read_timeout)):
            try:
                if isinstance(blob, OSError):
                    raise blob
                img = decode_frame(blob)
            except (
                OSError,
                RuntimeError,
                ValueError,
            ) as e:  # PIL: UnidentifiedImageError is an OSError
                if not os.path.isdir(video.path):
                    raise BadVideo(video, video.path, "missing folder") from None
                if not os.path.isfile(path):
                    raise BadVideo(video, path, "missing frame") from None
                if os.path.getsize(path) == 0:
                    raise BadVideo(video, path, "empty file (0 bytes)") from None
                raise BadVideo(video, path, f"unreadable frame: {_why(e)}") from None
            if frames and img.shape != frames[0].shape:
                raise BadVideo(video, path, _size_change(img, frames[0]))
            frames.append(img)
        return frames

    def read_video(self, video, numbers, source=None, device="cpu"):
        """Frames `numbers` of a video file (or of its bytes, `source`), opened once, on `device`. The
        file must hold the frames the list says (BadVideo otherwise, naming it and its list line)."""
        try:
            n, read = open_video(
                video.path if source is None else source, self.video_decoder, device
            )
            if n < max(
                1, video.num_frames
            ):  # 0: a `<video> <label>` line that could not be counted
                raise RuntimeError(
                    f"{video.num_frames} frames listed, the video has {n}" if n else "no frames"
                )
            frames = read([int(i) - self.start_index for i in numbers])
        except RuntimeError as e:
            raise BadVideo(
                video,
                video.path,
                "missing file"
                if not os.path.isfile(video.path) and source is None
                else f"unreadable video: {e}",
            ) from None
        for f in frames[1:]:  # a stream may change size midway
            if f.shape != frames[0].shape:
                raise BadVideo(video, video.path, _size_change(f, frames[0]))
        return frames

    def defer_clip(self, video, rng):
        """Bytes mode (--decode_device): -> (EncodedClip, {}). load_clip runs as far as choosing the frames,
        whose files are read but not decoded; the clip keeps a copy of `rng` as load_clip got it, and
        decode_batch, after decoding, replays load_clip with it: the same draws, the same code, so
        bytes mode cannot drift from the normal path whatever load_clip samples or how."""
        replay = copy.deepcopy(rng)
        try:
            self.load_clip(video, rng, read=_stop_at_frames)
            raise AssertionError("load_clip finished without reading its frames")
        except _FramesChosen as chosen:
            numbers = tuple(int(i) for i in chosen.numbers)
        if is_video_file(
            video.path
        ):  # the whole file; opened (not decoded) here: bad ones are replaced
            try:
                data = read_encoded(video.path)
            except OSError:
                raise BadVideo(video, video.path, "missing file") from None
            self.read_video(video, [], data)
            return EncodedClip(video, numbers, (video.path,), data, (0, data.numel()), replay), {}
        paths = tuple(self.frame_path(video, i) for i in numbers)
        blobs, size = [], None
        for i, path in zip(numbers, paths):
            try:
                with open(path, "rb") as f:
                    blobs.append(f.read())
                hw = _encoded_size(blobs[-1])
            except (OSError, ValueError):
                hw = None
            if hw is None or (size is not None and hw != size):
                # loading the frame(s) as the normal path would raises its own error (replaceable in
                # train mode); if that decodes after all (a header we cannot parse), ship it
                self.load_frames(video, [numbers[0], i] if size is not None else [i])
            size = size or hw
        offsets = np.cumsum([0] + [len(b) for b in blobs]).tolist()
        data = torch.frombuffer(bytearray(b"".join(blobs)), dtype=torch.uint8)
        return EncodedClip(video, numbers, paths, data, tuple(offsets), replay), {}

    def __getitem__(self, index):
        """(clip, label, info). Train mode: an unreadable video (BadVideo) is replaced by another one, drawn
        from (seed, epoch, index, attempt) only -- the same replacement for any worker count or resume
        point -- and each failure is one line of info["bad"]; the label is the replacement's. Val/test
        never substitute (it would change the metric): BadVideo propagates."""
        video = self.videos[index]
        rng = np.random.default_rng([self.seed, self.epoch, index])
        bad = []
        for attempt in range(1, BAD_ATTEMPTS + 2):
            try:
                clip, info = self.load_clip(video, rng)
                return clip, video.label, {**info, "bad": "\n".join(bad)}
            except BadVideo as e:
                if self.mode != "train" or len(self.videos) < 2 or isinstance(e, ReadTimeout):
                    raise
                bad.append(str(e))
                if attempt > BAD_ATTEMPTS:
                    raise BadVideo(
                        e.video,
                        e.path,
                        f"{e.reason}; the last of {len(bad)} unreadable videos "
                        f"in a row for sample {index} (epoch {self.epoch}): run `python "
                        "prepare.py check`",
                    ) from None
            # another video, never this sample itself; its clip draws from the same generator
            rng = np.random.default_rng([self.seed, self.epoch, index, attempt])
            j = int(rng.integers(len(self.videos) - 1))
            video = self.videos[j + (j >= index)]

    def load_clip(self, video, rng, read=None):
        """(video, numpy Generator) -> (clip, info). Train: clip uint8 (3, T, crop, crop) and
        info["box"], the float32 (4,) box that `crop_resize` still cuts out on the device (identity
        when the clip is final); with an augment.BatchAugment, info["augment"] too (the clip's drawn
        augmentation, for augment.apply). Val: (3, T, crop, crop); test: (V, 3, T, crop, crop),
        clip-major.
        Its frames come from `read(video, numbers)` (default: load_frames, decoding on this CPU).
        With encoded=True, an EncodedClip instead: see defer_clip."""
        if self.encoded and read is None:
            return self.defer_clip(video, rng)
        if video.num_frames < 1:  # a `<video> <label>` line whose video could not be counted: why
            self.read_video(video, [])
        clips = sample_indices(
            video.num_frames,
            self.t_length,
            self.t_stride,
            self.mode,
            self.num_clips if self.mode == "test" else 1,
            rng,
            self.start_index,
            self.test_sampling,
            self.num_segments,
        )
        numbers, inverse = np.unique(clips, return_inverse=True)  # decode each frame once
        frames = (read or self.load_frames)(video, numbers)
        H, W, _ = frames[0].shape
        info = {}
        if self.mode == "train":  # draws: frames, then per clip box, flip, augment -- in this order
            views, boxes, drawn = [], [], []
            for _ in range(self.reps):  # repeated augmentation: `reps` clips of the same frames
                if self.train_crop == "jitter":  # one box for every frame (snippet)
                    box = train_box(H, W, self.new_size, self.crop_size, rng)
                else:
                    more = self.train_crop == "multiscale13"
                    box = multiscale_box(H, W, self.new_size, self.crop_size, rng, more)
                # finish_box follows train_box's rescaled pixel grid; a multi-scale box is off that grid
                finish = finish_box if self.train_crop == "jitter" else resample_box
                crop, box = (
                    (finish(frames, box, self.crop_size), IDENTITY_BOX)
                    if self.finish_crop
                    else train_crop(frames, box, self.crop_size)
                )
                if self.flip and rng.random() < 0.5:  # mirror W, and the box
                    crop, box = crop.flip(-2), (box[0], 1 - box[1] - box[3], box[2], box[3])
                if hasattr(self.augment, "draw"):  # augment.BatchAugment: only its draws, here
                    drawn.append(self.augment.draw(rng, crop))
                    views.append(crop)
                else:
                    views.append(augment_clip(crop, self.augment, rng) if self.augment else crop)
                boxes.append(box)
            info["box"] = torch.tensor(boxes if self.reps > 1 else boxes[0], dtype=torch.float32)
            if drawn:  # --augment_device batch: augment.apply augments the batch after the transfer
                info["augment"] = torch.stack(drawn) if self.reps > 1 else drawn[0]
        else:
            views = [
                resized_crop(frames, b, self.crop_size)
                for b in crop_boxes(H, W, self.mode, self.new_size, self.crop_size, self.num_crops)
            ]
            if self.num_crops == 10:  # GroupOverSample's order: each crop, then its mirror image
                views = [v for crop in views for v in (crop, crop.flip(-2))]
        out = []
        for x in views:  # (N, c, c, 3)
            if not np.array_equal(
                numbers, clips.reshape(-1)
            ):  # back to clip order: test clips interleave
                x = x[
                    torch.from_numpy(inverse.reshape(-1))
                ]  # or overlap, short videos repeat frames
            out.append(
                x.reshape(*clips.shape, *x.shape[1:])
            )  # (clips, T, c, c, 3); TSN: T = N x t_length
        x = (
            out[0].unsqueeze(1) if len(out) == 1 else torch.stack(out, 1)
        )  # (clips, crops, T, c, c, 3)
        # (V, 3, T, c, c) as a VIEW of the decoder's interleaved memory: no de-interleaving copy here
        # (`collate` keeps it that way; .contiguous() if you need planar memory).
        x = x.flatten(0, 1).permute(0, 4, 1, 2, 3)
        return (x if self.mode == "test" or self.reps > 1 else x[0]), info


# ---- bytes mode: decoding on the device (--decode_device cuda) ------------------------------------
class _FramesChosen(Exception):
    """Stops load_clip in defer_clip once it has chosen its frames (control flow, never an error)."""

    def __init__(self, numbers):
        self.numbers = numbers


def _stop_at_frames(video, numbers):
    raise _FramesChosen(numbers)


def _encoded_size(blob):
    """(H, W) from an image file's header without decoding it: JPEG by its SOF marker (a few us; Pillow
    takes ~50 us), other formats by Pillow. None if unreadable."""
    if blob[:3] != b"\xff\xd8\xff":
        with Image.open(io.BytesIO(blob)) as img:
            return img.height, img.width
    k = 2
    while k + 9 <= len(
        blob
    ):  # segments: FF <marker> <2-byte big-endian length including itself> ...
        if blob[k] != 0xFF:
            return None
        marker = blob[k + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # SOFn (not DHT, JPG, DAC)
            return int.from_bytes(blob[k + 5 : k + 7], "big"), int.from_bytes(
                blob[k + 7 : k + 9], "big"
            )
        if marker == 0xFF:  # fill byte
            k += 1
            continue
        k += 2 + int.from_bytes(blob[k + 2 : k + 4], "big")
    return None


@dataclasses.dataclass
class EncodedClip:
    """One item in bytes mode (--decode_device): the undecoded frame files load_clip chose, and a copy of
    its generator for decode_batch to replay load_clip after decoding. `data` is all the files, one
    after another (one tensor: one shared-memory handle per clip from a DataLoader worker); frame k is
    data[offsets[k]:offsets[k + 1]]."""

    video: Video
    numbers: tuple  # frame numbers, as load_clip passed them to its reader
    paths: tuple  # their files, for error messages
    data: torch.Tensor
    offsets: tuple
    rng: np.random.Generator

    def frames(self):
        return [self.data[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    def pin_memory(self):  # DataLoader(pin_memory=True) calls it
        return dataclasses.replace(self, data=self.data.pin_memory())


def collate_encoded(batch):
    """DataLoader collate_fn in bytes mode: (list of EncodedClip, labels[, info collated])."""
    rest = torch.utils.data.default_collate([item[1:] for item in batch])
    return ([item[0] for item in batch], *rest)


def decode_batch(batch, device, dataset):
    """A batch of EncodedClips (from collate_encoded) -> the batch that data.collate would have given,
    its clips decoded and cropped on `device`: (clips, labels[, info]), clips uint8 (B, [V,] 3, T, c, c)
    in channels_last_3d memory on `device`; labels stay where they are. Whole clips' JPEGs are decoded in
    batched calls (nvJPEG on CUDA, batched: TorchCodec, else torchvision) of <= DECODE_CHUNK bytes of
    frames (a batch of 1080p at once: ~6 GB); then each clip is `dataset.load_clip` (the loader's) replayed
    on the decoded frames with the generator it had in the loader: the same crops and flips, run on the
    device. On the CPU this is exactly the normal path (tested); on CUDA, nvJPEG's pixels and the float
    resize differ by a few levels. Video files are decoded one by one, on `device` with TorchCodec
    (NVDEC on CUDA), else on the CPU and copied."""
    encoded, labels, *info = batch
    device = torch.device(device)
    clips, infos, chunk, size = [], [], [], 0
    for n, e in enumerate(encoded):
        chunk, size = chunk + [e], size + _decoded_bytes(e)
        if n + 1 < len(encoded) and size + _decoded_bytes(encoded[n + 1]) <= DECODE_CHUNK:
            continue
        jpegs = [c for c in chunk if not is_video_file(c.video.path)]
        frames = _decode_on(
            device,
            [f for c in jpegs for f in c.frames()],
            [(c.video, p) for c in jpegs for p in c.paths],
        )
        for (
            e
        ) in chunk:  # cropped here: the chunk's full-size frames are freed before the next decode
            if is_video_file(e.video.path):
                mine = dataset.read_video(e.video, e.numbers, e.data, device)
            else:
                mine, frames = (
                    [f.permute(1, 2, 0) for f in frames[: len(e.numbers)]],
                    frames[len(e.numbers) :],
                )

            def read(video, numbers, mine=mine, e=e):
                if tuple(int(i) for i in numbers) != e.numbers:
                    raise RuntimeError(
                        f"load_clip chose other frames on replay ({e.video.path}): "
                        "it must draw only from rng"
                    )
                for f, path in zip(mine, e.paths):
                    if f.shape != mine[0].shape:
                        raise BadVideo(e.video, path, _size_change(f, mine[0]))
                return mine

            clip, clip_info = dataset.load_clip(e.video, copy.deepcopy(e.rng), read=read)
            clips.append(clip.movedim(-4, -1))  # as collate stacks: the interleaved memory as it is
            infos.append(clip_info)
        chunk, size = [], 0
    out = torch.stack(clips).movedim(-1, -4)
    if not info:
        return out, labels
    extra = (
        torch.utils.data.default_collate(infos) if infos[0] else {}
    )  # e.g. info["box"], drawn on replay
    return out, labels, {**info[0], **extra}


def _decoded_bytes(e):  # from the first frame's JPEG header (a few us); else counted as 1080p
    size = is_jpeg(e.frames()[0]) and _encoded_size(e.frames()[0].numpy().tobytes())
    return 3 * len(e.numbers) * math.prod(size or (1080, 1920))


def _decode_on(device, blobs, where):
    """Encoded frames (1-D uint8 CPU tensors) -> uint8 (3, H, W) tensors on `device`: decode_frame on the
    CPU; on CUDA, the JPEGs in one batched nvJPEG call, anything else on the CPU and copied."""
    if device.type == "cpu":
        out = []
        for b, (video, path) in zip(blobs, where):
            try:
                out.append(decode_frame(b).permute(2, 0, 1))
            except (OSError, RuntimeError) as err:
                raise BadVideo(video, path, f"unreadable frame: {_why(err)}") from None
        return out
    jpeg = [k for k, b in enumerate(blobs) if is_jpeg(b)]
    out = [None] * len(blobs)
    decode = codec_decode_jpeg or (
        tv_decode_jpeg
        and (lambda x, mode, device: tv_decode_jpeg(x, mode=ImageReadMode.RGB, device=device))
    )
    if jpeg and not decode:
        raise RuntimeError(
            f"decoding on {device} needs TorchCodec (pip install 'torchcodec>=0.16')"
        )
    try:
        decoded = decode([blobs[k] for k in jpeg], mode="RGB", device=device) if jpeg else []
    except (
        torch.OutOfMemoryError
    ):  # never frame by frame: that re-decodes everything, slowly, to no end
        raise
    except Exception:  # one bad file fails the whole call (RuntimeError, ValueError, ...): name it
        for k in jpeg:
            try:
                decode([blobs[k]], mode="RGB", device=device)
            except Exception as err:
                raise (
                    err
                    if isinstance(err, torch.OutOfMemoryError)
                    else BadVideo(*where[k], f"unreadable frame on {device}: {_why(err)}")
                ) from None
        raise
    for k, img in zip(jpeg, decoded):
        out[k] = img
    for k in set(range(len(blobs))) - set(jpeg):
        out[k] = _decode_on(torch.device("cpu"), [blobs[k]], [where[k]])[0].to(device)
    return out
