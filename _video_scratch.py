"""Video files -> exact frames (to move into data.py)."""
import io
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


# ---- video files: exact frames ---------------------------------------------------------------------
VIDEO_FILES = (".mp4", ".avi", ".mkv", ".webm", ".mov")
VIDEO_DECODERS = ("auto", "torchcodec", "pyav")


def is_video_file(path):
    return os.path.splitext(str(path))[1].lower() in VIDEO_FILES


def video_decoder(choice="auto"):
    """--video_decoder -> the decoder used: TorchCodec if FFmpeg's libraries load, else PyAV.
    ValueError naming what is missing when the choice cannot be had."""
    if choice not in VIDEO_DECODERS:
        raise ValueError(f"--video_decoder must be one of {VIDEO_DECODERS}, got {choice!r}")
    if choice != "pyav" and VideoDecoder is not None and _NO_VIDEO_CODEC is None:
        return "torchcodec"
    if choice == "torchcodec":
        raise ValueError(f"--video_decoder torchcodec: not available here ({_NO_VIDEO_CODEC}); install "
                         "FFmpeg's libraries (apt-get install libavcodec59 ...) or use pyav")
    if av is None:
        raise ValueError("video files need PyAV (pip install av) or TorchCodec with FFmpeg's libraries")
    return "pyav"


def open_video(source, decoder="pyav", device="cpu"):
    """A video file (path, or its bytes as a 1-D uint8 tensor) -> (num_frames, read), read(indices) ->
    list of uint8 (H, W, 3) tensors on `device`: the file is opened once and serves every read. Frame k
    is the k-th frame a plain decode from the start outputs (`extract`'s img_{k+1:05d}.jpg). Failures
    are RuntimeErrors with a one-line reason.

    AVI files always go to PyAV, counted from the first frame: AVI stores no presentation timestamps,
    FFmpeg guesses them (wrongly for h264 with B-frames), and TorchCodec's exact mode then returns the
    frame before the one asked for, or fails on the last one (tests/videos.py: h264.avi, mpeg4.avi)."""
    errors = (OSError, ValueError, RuntimeError, IndexError) + ((av.error.FFmpegError,) if av else ())
    try:
        if isinstance(source, torch.Tensor):  # bytes mode
            head = bytes(source[:12].tolist())
        else:
            with open(source, "rb") as f:
                head = f.read(12)
        avi = head[:4] == b"RIFF" and head[8:12] == b"AVI "
        use_codec = decoder == "torchcodec" and not avi
        n, read = _codec_open(source, device) if use_codec else _pyav_open(source, avi)
    except errors as e:
        raise RuntimeError(" ".join(f"{type(e).__name__}: {e}".split())) from None

    def frames(indices):
        if len(indices) and (min(indices) < 0 or max(indices) >= n):
            raise RuntimeError(f"frame {max(indices) + 1} asked for, the video has {n} frames")
        try:
            got = read(sorted({int(i) for i in indices}))
        except errors as e:
            raise RuntimeError(" ".join(f"{type(e).__name__}: {e}".split())) from None
        return [got[int(i)].to(device) for i in indices]
    return n, frames


def _codec_open(source, device):
    """TorchCodec's VideoDecoder in exact mode: opening scans the packets (no decoding), so frame k is
    the k-th in presentation order; get_frames_at seeks to the keyframe before a run of frames and
    decodes forward, each frame once."""
    decoder = VideoDecoder(source, seek_mode="exact", dimension_order="NHWC", device=device)
    return decoder.metadata.num_frames or 0, lambda need: dict(zip(need, decoder.get_frames_at(need).data))


def _pyav_open(source, avi):
    """PyAV. Opening demuxes the video packets (no decoding): frame k is the packet with the k-th
    smallest timestamp, leaving out those an mp4 edit list discards (a plain decode drops their
    frames). A read decodes from the last keyframe at or before its first frame and takes frames by
    timestamp, which names a frame exactly (never "the frame at about this time"). Without usable
    timestamps (AVI, missing or repeated ones), or if a frame does not come out where they say, it
    counts frames from the start of the file, opened afresh."""
    box = [_av_open(source)]
    packets = [(p.pts, p.is_keyframe) for p in box[0].demux(box[0].streams.video[0])
               if p.size and not p.is_discard]
    pts = sorted(t for t, _ in packets)
    timed = not avi and None not in pts and len(set(pts)) == len(pts)
    keys = [t for t, key in packets if key]

    def read(need):  # sorted distinct indices -> {index: frame}
        got = {}
        if timed:
            wanted = {pts[k]: k for k in need}
            box[0].seek(max((t for t in keys if t <= pts[need[0]]), default=pts[0]), backward=True,
                        stream=box[0].streams.video[0])
            for frame in box[0].decode(video=0):
                if frame.pts in wanted:
                    got[wanted[frame.pts]] = _rgb(frame)
                if len(got) == len(need) or (frame.pts is not None and frame.pts > pts[need[-1]]):
                    break  # frames come out in timestamp order: one not out by now never will be
            if len(got) == len(need):
                return got
        box[0].close()
        box[0] = _av_open(source)
        for k, frame in enumerate(box[0].decode(video=0)):
            if k in need:
                got[k] = _rgb(frame)
            if k == need[-1]:
                return got
        raise RuntimeError(f"frame {need[-1] + 1} asked for, a decode gives fewer")
    return len(pts), read


def _av_open(source):
    container = av.open(io.BytesIO(source.numpy().tobytes()) if isinstance(source, torch.Tensor) else source)
    if not container.streams.video:
        raise ValueError("no video stream")
    container.streams.video[0].codec_context.thread_count = 1  # one core per loader worker, as TorchCodec
    return container


def _rgb(frame):
    return torch.from_numpy(frame.to_ndarray(format="rgb24"))
