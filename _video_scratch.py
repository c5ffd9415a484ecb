"""Video files -> exact frames (to move into data.py)."""
import os

import torch

try:
    import av  # PyAV's wheel bundles FFmpeg: video files work right after `pip install -r requirements.txt`
except ImportError:
    av = None
try:  # TorchCodec's video decoder needs FFmpeg's shared libraries (its wheel ships none)
    from torchcodec._core import ops as _codec_ops
    from torchcodec.decoders import VideoDecoder
    _NO_VIDEO_CODEC = None if getattr(_codec_ops, "_FFMPEG_AVAILABLE", True) else "no FFmpeg libraries"
except (ImportError, OSError, RuntimeError) as e:
    VideoDecoder, _NO_VIDEO_CODEC = None, f"{type(e).__name__}: {e}"

VIDEO_FILES = (".mp4", ".avi", ".mkv", ".webm", ".mov")
VIDEO_DECODERS = ("auto", "torchcodec", "pyav")


def is_video_file(path):
    return os.path.splitext(str(path))[1].lower() in VIDEO_FILES


def video_decoder(choice="auto"):
    """--video_decoder -> the decoder used: TorchCodec if FFmpeg's libraries load, else PyAV.
    ValueError naming what is missing when the choice cannot be had."""
    if choice not in VIDEO_DECODERS:
        raise ValueError(f"--video_decoder must be one of {VIDEO_DECODERS}, got {choice!r}")
    if choice in ("auto", "torchcodec") and VideoDecoder is not None and _NO_VIDEO_CODEC is None:
        return "torchcodec"
    if choice == "torchcodec":
        raise ValueError(f"--video_decoder torchcodec: not available here ({_NO_VIDEO_CODEC}); "
                         "install FFmpeg's libraries (apt-get install libavcodec59 ...) or use pyav")
    if av is None:
        raise ValueError("video files need PyAV (pip install av) or TorchCodec with FFmpeg's libraries")
    return "pyav"


def _is_avi(path):
    with open(path, "rb") as f:
        head = f.read(12)
    return head[:4] == b"RIFF" and head[8:12] == b"AVI "


def open_video(path, decoder="pyav", device="cpu"):
    """A video file -> a reader: .num_frames, .frames(indices) -> [uint8 (H, W, 3)], .close().
    Frame k is the k-th frame a plain decode from the start outputs (what `extract` writes as its
    (k+1)-th JPEG). RuntimeError with the reason if the file cannot be read.

    AVI files always go to PyAV, counted from the first frame: AVI stores no presentation timestamps,
    FFmpeg guesses them (wrongly for h264 with B-frames), and TorchCodec's exact mode then returns the
    frame before the one asked for, or fails on the last frame (measured: tests/videos.py)."""
    if decoder == "torchcodec" and not _is_avi(path):
        return _CodecReader(path, device)
    return _PyAVReader(path)


def _error(e):
    return " ".join(f"{type(e).__name__}: {e}".split())  # one line


class _CodecReader:
    """TorchCodec's VideoDecoder in exact mode: it scans the file's packets once when opened (no
    decoding), so frame k is the k-th frame in presentation order, and get_frames_at seeks to the
    keyframe before each run of frames and decodes forward from there."""

    def __init__(self, path, device="cpu"):
        try:
            self.decoder = VideoDecoder(path, seek_mode="exact", dimension_order="NHWC", device=device)
        except (RuntimeError, ValueError) as e:  # ValueError: no video stream
            raise RuntimeError(_error(e)) from None
        self.num_frames = self.decoder.metadata.num_frames or 0

    def frames(self, indices):
        _in_range(indices, self.num_frames)
        try:
            return list(self.decoder.get_frames_at([int(i) for i in indices]).data)
        except (RuntimeError, IndexError) as e:
            raise RuntimeError(_error(e)) from None

    def close(self):
        self.decoder = None


def _in_range(indices, n):
    if len(indices) and (min(indices) < 0 or max(indices) >= n):
        raise RuntimeError(f"frame {max(indices) + 1} asked for, the video has {n} frames")


class _PyAVReader:
    """PyAV. Opening demuxes every packet of the first video stream (no decoding) for the frame count
    and the timestamps. Frame k is the packet with the k-th smallest timestamp, leaving out packets
    an mp4 edit list discards (a plain decode drops their frames). Frames are found by decoding from
    the last keyframe at or before the first one needed and matching timestamps, which identify a
    frame exactly (a frame is never taken for "the one at about this time"). Without usable
    timestamps (AVI, missing or repeated ones) frames are counted from the start of the file."""

    def __init__(self, path):
        self.path = path
        try:
            self.container = _av_open(path)
            stream = self.container.streams.video[0]
            packets = [(p.pts, p.is_keyframe) for p in self.container.demux(stream)
                       if p.size and not p.is_discard]
        except (av.error.FFmpegError, ValueError, OSError) as e:
            raise RuntimeError(_error(e)) from None
        self.num_frames = len(packets)
        pts = [p for p, _ in packets]
        self.counted = _is_avi(path) or None in pts or len(set(pts)) < len(pts)
        if not self.counted:
            self.pts = sorted(pts)
            self.index = {t: k for k, t in enumerate(self.pts)}
            self.keys = [t for t, key in packets if key]

    def frames(self, indices):
        _in_range(indices, self.num_frames)
        need = sorted({int(i) for i in indices})
        got = None if self.counted else self._seek_and_match(need)
        if got is None:  # no timestamps, or a frame did not come out where they said: count from the start
            got = self._count_from_start(need)
        return [got[int(i)] for i in indices]

    def _decode(self, seek_to=None):
        """Frames from where the container is (or from the keyframe at or before timestamp `seek_to`)."""
        stream = self.container.streams.video[0]
        try:
            if seek_to is not None:
                self.container.seek(seek_to, stream=stream, backward=True)
            yield from self.container.decode(stream)
        except (av.error.FFmpegError, ValueError) as e:
            raise RuntimeError(_error(e)) from None

    def _seek_and_match(self, need):
        wanted = {self.pts[k]: k for k in need}
        # the last keyframe at or before the first frame needed; frames out are told apart by timestamp
        start = max((t for t in self.keys if t <= self.pts[need[0]]), default=self.pts[0])
        got = {}
        for frame in self._decode(start):
            if frame.pts in wanted:
                got[wanted[frame.pts]] = _rgb(frame)
            if len(got) == len(need) or (frame.pts is not None and frame.pts > self.pts[need[-1]]):
                break  # frames come out in timestamp order: a frame not out by now never will be
        return got if len(got) == len(need) else None

    def _count_from_start(self, need):
        self.container.close()  # a fresh open: the one start of the file that is certain
        self.container = _av_open(self.path)
        got, n = {}, 0
        for frame in self._decode():
            if n in need:
                got[n] = _rgb(frame)
            n += 1
            if n > need[-1]:
                return got
        raise RuntimeError(f"frame {need[-1] + 1} asked for, a decode gives {n} frames")

    def close(self):
        self.container.close()


def _av_open(path):
    container = av.open(path)
    if not container.streams.video:
        container.close()
        raise ValueError("no video stream")
    container.streams.video[0].codec_context.thread_count = 1  # one core per loader worker, as TorchCodec
    return container


def _rgb(frame):
    return torch.from_numpy(frame.to_ndarray(format="rgb24"))
