"""Files -> uint8 frames: image decoders (TorchCodec, torchvision, Pillow), video files read exactly
(TorchCodec's VideoDecoder, PyAV), reads with a timeout, and BadVideo, the one error a listed video
that cannot be read raises.

References
- TorchCodec (pytorch/torchcodec, src/torchcodec/decoders/_image_decoders.py): decode_jpeg /
  decode_image, batched nvJPEG decoding of a list of JPEGs on CUDA.
- docs/video.md: exact frames from video files, AVI's timestamps, the decoders.
"""

import ctypes
import io
import os
import re
import threading
import warnings

import numpy as np
import torch
from PIL import Image

try:  # TorchCodec (>= 0.16): libjpeg-turbo on the CPU, nvJPEG on CUDA; no FFmpeg needed for images
    from torchcodec.decoders import (
        decode_image as codec_decode_image,
        decode_jpeg as codec_decode_jpeg,
    )

    _NO_CODEC = None
# not installed (Pillow decodes, ~1.3x slower) or broken
except (ImportError, OSError, RuntimeError) as e:
    codec_decode_image = codec_decode_jpeg = None
    _NO_CODEC = f"{type(e).__name__}: {e}"
    # installed but its libraries do not load (a wheel for another torch)
    if not isinstance(e, ImportError):
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

# decode_frame's decoder: "torchcodec", "torchvision" (bit-identical on JPEGs: both call
# libjpeg-turbo) or "pil"; module-level so `bench.py data` can time each (a worker keeps the value
# it started with).
DECODERS = ("torchcodec", "torchvision", "pil")
DECODER = "torchcodec" if codec_decode_image is not None else "pil"

# torchvision >= 0.29 deprecates its image decoders (in favour of TorchCodec) and warns on every
# call. Silenced once here, for that message only: a catch_warnings() around each call costs ~3% of
# a clip.
warnings.filterwarnings(
    "ignore",
    message="The image decoding and encoding capabilities of TorchVision",
    category=DeprecationWarning,
)


# glibc's malloc maps every buffer above a moving threshold afresh from the kernel and hands freed
# heap above another back to it, so a loader's buffers (a clip's 16 decoded frames of ~0.5 MB, its
# 2.4 MB crop) can fault in each of their pages again, clip after clip: ~540 minor faults a clip
# measured, at 1.4-4 us each, depending on the heap's history (docs/performance.md). Fixed
# thresholds keep the freed heap for the next clip. M_TRIM_THRESHOLD and M_MMAP_THRESHOLD: malloc.h.
MALLOPT = {-1: 64 << 20, -3: 16 << 20}


def keep_heap():
    """Buffers under 16 MB from the heap, and up to 64 MB of freed heap kept, in this process (and
    the processes it forks): glibc's mallopt. A no-op where there is none (macOS, Windows)."""
    libc = ctypes.CDLL(None) if os.name == "posix" else None
    if not hasattr(libc, "mallopt"):
        return
    for param, value in MALLOPT.items():
        libc.mallopt(param, value)


# ---- decoding: files -> uint8 frames -------------------------------------------------------------
def read_encoded(path, count=-1):
    """A file's bytes (the first `count`; -1: all) as a 1-D uint8 tensor, what decoders take;
    OSError."""
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8, count=count))


def is_jpeg(data):
    # SOI + the next marker
    return data.numel() >= 3 and bytes(data[:3].tolist()) == b"\xff\xd8\xff"


def decode_frame(source, decoder=None):
    """An image file (path) or its bytes (1-D uint8 tensor) -> uint8 (H, W, 3) tensor, decoded with
    `decoder` (default: DECODER). Raises OSError / RuntimeError if missing or corrupt. TorchCodec
    and torchvision give the same pixels on JPEGs (tested), as (3, H, W) views of (H, W, 3)
    memory."""
    decoder = decoder or DECODER
    data = source if isinstance(source, torch.Tensor) else read_encoded(source)
    if decoder == "pil":
        with Image.open(io.BytesIO(data.numpy())) as img:
            return torch.from_numpy(np.array(img.convert("RGB")))
    if decoder == "torchcodec" and codec_decode_image is not None:
        try:  # decode_jpeg straight away: decode_image would sniff the format from the bytes again
            img = (codec_decode_jpeg if is_jpeg(data) else codec_decode_image)(data, mode="RGB")
        # "Unsupported or unrecognized image format": a corrupt file, for us
        except ValueError as e:
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


DRAFT_SCALES = (8, 4, 2)  # libjpeg's DCT scaling: 1/8, 1/4, 1/2 (jpeg_calc_output_dimensions)


def draft_scale(width, height, min_short):
    """The largest libjpeg reduction 1/s of a width x height JPEG whose short side stays at least
    `min_short` (libjpeg rounds its outputs up: ceil(side / s)); 1 if none."""
    return next((s for s in DRAFT_SCALES if -(-min(width, height) // s) >= min_short), 1)


def decode_draft(source, min_short):
    """--jpeg-draft: a JPEG (path or bytes) decoded at a reduced scale inside libjpeg (Pillow's
    `draft`: DCT scaling, 1/2, 1/4 or 1/8, the largest whose short side stays >= min_short) ->
    uint8 (H', W', 3). Not the exact path: its pixels differ from decoding at full size and
    resampling (docs/performance.md measures both); a file that cannot be reduced (short side <
    2 min_short, or not a JPEG) is decoded exactly by decode_frame."""
    data = source if isinstance(source, torch.Tensor) else read_encoded(source)
    if not is_jpeg(data):
        return decode_frame(data)
    with Image.open(io.BytesIO(data.numpy())) as img:
        s = draft_scale(*img.size, min_short)
        if s == 1:
            return decode_frame(data)
        W, H = img.size
        # draft picks the largest reduction whose output is at least the size asked for
        img.draft("RGB", (-(-W // s), -(-H // s)))
        return torch.from_numpy(np.array(img if img.mode == "RGB" else img.convert("RGB")))


def available_decoders():
    return [
        d for d, ok in zip(DECODERS, (codec_decode_image, decode_image, Image)) if ok is not None
    ]


def _size_change(frame, first):
    return f"frame is {tuple(frame.shape)}, the first frame {tuple(first.shape)}"


def _why(err):
    """A decode error without torchvision's C++ source location ("decode_jpeg, /path.cpp:171,
    ...")."""
    return re.sub(r"^\w+, \S+:\d+, ", "", str(err))


# ---- video files: exact frames -------------------------------------------------------------------
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


def video_fps(path):
    """A video file's frame rate (frames a second): its video stream's average rate as the
    container states it (PyAV, else TorchCodec's metadata); 0.0 if it cannot be read."""
    try:
        if av is None:
            return float(VideoDecoder(path).metadata.average_fps or 0.0)
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            return float(stream.average_rate or stream.guessed_rate or 0.0)
    except (*_AV_ERRORS, TypeError):  # TypeError: neither decoder installed
        return 0.0


def open_video(source, decoder="pyav", device="cpu"):
    """A video file (path, or its bytes as a 1-D uint8 tensor) -> (num_frames, read): read(indices)
    -> list of uint8 (H, W, 3) tensors on `device`, from the file opened once. Frame k is the k-th
    frame a plain decode from the start outputs: `extract`'s img_{k+1:05d}.jpg. Failures:
    RuntimeError, one line. TorchCodec's VideoDecoder runs in exact mode: opening scans the packets
    (no decoding), and get_frames_at decodes forward from the keyframe before each run of frames,
    each frame once. AVI files always go to PyAV, counted from the first frame: AVI stores no
    presentation timestamps, FFmpeg reconstructs them, and with B-frames TorchCodec's exact mode
    returns the frame before the one asked for after a seek, and fails on the last one
    (tests/videos.py: h264.avi, mpeg4.avi)."""
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
    smallest timestamp, leaving out those an mp4 edit list discards (a plain decode drops their
    frames). A read decodes from the last keyframe at or before each frame it needs, seeking there
    only when that keyframe lies past the last frame decoded (else it decodes on), and takes frames
    by timestamp, which names a frame exactly (never "the frame at about this time"). Without usable
    timestamps (AVI, missing or repeated ones), or if a frame is not where they say, it counts
    frames from the start of the file, opened afresh."""
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
        last, frames = None, None  # the last decoded frame's timestamp; the decode under way
        for k in need:
            if not timed:
                break
            # Seek to frame k's keyframe when it lies past the last decoded frame: the frames
            # between are skipped, not decoded (a 16x4 clip at a keyframe every 12 frames decodes
            # 52 frames instead of 62); else decode on.
            key = max((t for t in keys if t <= pts[k]), default=pts[0])
            if last is None or key > last:
                box[0].seek(key, backward=True, stream=box[0].streams.video[0])
                frames = box[0].decode(video=0)
            for frame in frames:
                last = frame.pts if frame.pts is not None else last
                if frame.pts in wanted:
                    got[wanted[frame.pts]] = rgb(frame)
                # frames come out in timestamp order: one not out by now never will be
                if (frame.pts or 0) >= pts[k]:
                    break
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
    # one core per loader worker, as TorchCodec
    container.streams.video[0].codec_context.thread_count = 1
    return container


class BadVideo(Exception):
    """A listed video that cannot be read: its folder or a frame is missing, a frame is empty,
    truncated, undecodable, or of another size than the first. One line: "<list>:<line>: <frame
    path>: <reason> (video <folder>)". Train mode replaces such a video
    (VideoFrameDataset.__getitem__); val/test raise."""

    def __init__(self, video, path=None, reason=None):
        # BadVideo(text): how a DataLoader worker's exception is re-raised in the main
        if path is None:
            # process (torch's ExceptionWrapper passes the worker's whole traceback): keep its last
            # line
            mark = f"{type(self).__name__}: "
            lines = [ln for ln in str(video).splitlines() if mark in ln] or [str(video)]
            self.video = self.path = self.reason = None
            super().__init__(lines[-1].split(mark, 1)[-1])
            return
        self.video, self.path, self.reason = video, path, reason
        super().__init__(f"{video.list_file}:{video.line}: {path}: {reason} (video {video.path})")

    # pickled (multiprocessing): re-created with the same fields, or the same text
    def __reduce__(self):
        return BadVideo, (
            (self.video, self.path, self.reason) if self.path is not None else (str(self),)
        )


class ReadTimeout(BadVideo):
    """A frame whose read never returned (a FIFO in its place, a stalled network mount): never
    replaced, the run ends with this one line -- the reading thread stays blocked, and the next read
    may block too."""

    def __reduce__(self):
        return ReadTimeout, (
            (self.video, self.path, self.reason) if self.path is not None else (str(self),)
        )


def read_files(video, paths, timeout=None, count=-1):
    """Each path's bytes (read_encoded), or the OSError its read raised. timeout (s): the reads run
    in a daemon thread; one still blocked after `timeout` raises ReadTimeout naming its file (an
    open() or read() cannot be interrupted, and a hang would stop every worker of the run
    silently)."""
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
    # daemon: a blocked one never delays the exit
    reader = threading.Thread(target=work, daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        raise ReadTimeout(
            video,
            paths[min(len(out), len(paths) - 1)],
            f"no data after --read_timeout {timeout:g} s (a FIFO? a stalled network mount?)",
        )
    return out
