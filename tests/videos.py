"""Test videos made with PyAV whose frames carry their own index in their pixels.

Frame k shows k in binary as 16x16 black/white blocks (macroblock aligned, so lossy coding at any
sane quality keeps them), followed by the same bits inverted: `frame_index(rgb)` reads k back, or -1
when the blocks are not a clean code (a frame from a broken decode). A sequential decode of every
video here gives frames 0, 1, 2, ... in order (edit_list.mp4: 3, 4, 5, ...); each `TRAPS` entry
breaks one assumption that a frame-accurate reader must not make:

- h264_long_gop.mp4: B-frames (pts != dts, decode order != presentation order) and a single
  keyframe: a timestamp seek lands far from the frame, and only the first frame is a safe place to
  start.
- start_offset.mkv / start_offset.mp4: the first timestamp is 2.5 s, not 0 (the mp4 keeps it as an
  edit list): "frame k is at k / fps" is wrong, and an index computed from timestamps is off by 62.
- vfr.mkv: variable frame rate (frame durations 1, 2 or 3 ticks): time / fps is not an index.
- wrong_count.avi: the AVI header says twice as many frames as the file holds: never trust
  nb_frames.
- edit_list.mp4: an mp4 edit list hides the first 3 encoded frames: frame 0 shows pattern 3, and the
  file holds more packets than a decode gives frames.
- h264.avi: h264 with B-frames in AVI, whose timestamps FFmpeg can only guess (and gets wrong).
- mpeg4.avi: MPEG-4 part 2 with B-frames in AVI (no presentation timestamps stored, frames in decode
  order), keyframe every 12 frames: the classic UCF101 / HMDB51 file.

`BAD` are videos a reader must refuse (or a training loop replace): truncated, no video stream, no
decodable frame, undecodable packets in the middle.
"""

import os
from fractions import Fraction

import av
import numpy as np

W, H = 96, 64  # even sizes (4:2:0); short side 64
BLOCK = 16
BITS = 10  # frame indices 0 .. 1023
FRAMES = 75


def pattern(k, w=W, h=H):
    """uint8 (h, w, 3): frame k. Blocks in raster order: BITS bits of k (MSB first), then the same
    bits inverted; the remaining blocks are a k-dependent grey ramp (real motion for the
    encoder)."""
    cols = w // BLOCK
    bits = [(k >> (BITS - 1 - b)) & 1 for b in range(BITS)]
    code = bits + [1 - b for b in bits]
    img = np.empty((h, w, 3), np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    img[...] = ((xx * 3 + yy * 2 + k * 7) % 256)[..., None]  # background moves with k
    img[..., 1] //= 2
    for n, bit in enumerate(code):
        y, x = (n // cols) * BLOCK, (n % cols) * BLOCK
        img[y : y + BLOCK, x : x + BLOCK] = 235 if bit else 20
    return img


def frame_index(rgb):
    """A decoded frame (H, W, 3 uint8 array or tensor, the pattern at any scale) -> its index, or
    -1."""
    img = np.asarray(rgb, dtype=np.float32).mean(-1)
    # blocks per row, block side in this frame's pixels
    cols, b = (W // BLOCK, img.shape[1] * BLOCK / W)
    m = max(1, round(b / 5))  # margin: block edges blur under lossy coding and resizing

    def block(n):
        y, x = round((n // cols) * b), round((n % cols) * b)
        return img[y + m : round(y + b) - m, x + m : round(x + b) - m].mean()

    means = [block(n) for n in range(2 * BITS)]
    bits = [v > 128 for v in means]
    if any(a == c for a, c in zip(bits[:BITS], bits[BITS:])) or any(40 < v < 215 for v in means):
        return -1
    return int("".join("1" if c else "0" for c in bits[:BITS]), 2)


def _encode(path, codec, pts, options=None, time_base=None, rate=25, fmt=None, mangle=None, n=None):
    """Encode frames 0 .. len(pts) - 1 with the given presentation timestamps (in time_base units)
    and mux them. mangle(i, bytes) -> bytes rewrites the payload of the i-th packet (decode
    order)."""
    with av.open(path, "w", format=fmt) as out:
        s = out.add_stream(codec, rate=rate, options=options or {})
        s.width, s.height, s.pix_fmt = W, H, "yuv420p"
        tb = time_base or Fraction(1, rate)
        s.codec_context.time_base = tb
        count = 0

        def mux(packets):
            nonlocal count
            for p in packets:
                if mangle is not None and p.size:
                    data = mangle(count, bytes(p))
                    q = av.Packet(data)
                    q.pts, q.dts, q.time_base, q.stream = p.pts, p.dts, p.time_base, s
                    q.is_keyframe = p.is_keyframe
                    p = q
                count += 1
                out.mux(p)

        for k, t in enumerate(pts):
            f = av.VideoFrame.from_ndarray(pattern(k), format="rgb24")
            f.pts, f.time_base = t, tb
            mux(s.encode(f))
        mux(s.encode(None))
    return path


def h264_long_gop(path):
    return _encode(
        path,
        "libx264",
        range(FRAMES),
        {"bf": "3", "g": "1000", "keyint_min": "1000", "sc_threshold": "0", "crf": "18"},
    )


def start_offset(path):
    pts = [2500 + 40 * k for k in range(FRAMES)]
    return _encode(
        path, "libx264", pts, {"bf": "2", "g": "20", "crf": "18"}, time_base=Fraction(1, 1000)
    )


def vfr(path):
    gaps = [1, 2, 1, 3, 1, 1, 2]
    pts = np.cumsum([0] + [gaps[k % len(gaps)] * 20 for k in range(FRAMES - 1)]).tolist()
    return _encode(
        path, "libx264", pts, {"bf": "2", "g": "30", "crf": "18"}, time_base=Fraction(1, 1000)
    )


def edit_list(path):
    """Timestamps from -3 frames: the mp4 muxer writes an edit list that starts the video at frame
    3, and a plain decode drops frames 0-2 (their packets are still in the file, marked discard)."""
    return _encode(path, "libx264", range(-3, FRAMES - 3), {"bf": "2", "g": "20", "crf": "18"})


def vp9_webm(path):
    """VP9 in WebM, as Something-Something v2 ships its videos."""
    return _encode(
        path,
        "libvpx-vp9",
        range(FRAMES),
        {"g": "20", "crf": "30", "b": "0", "deadline": "realtime"},
    )


def h264_avi(path):
    """h264 with B-frames in AVI: AVI stores no presentation timestamps, FFmpeg's guesses are
    wrong."""
    return _encode(path, "libx264", range(FRAMES), {"bf": "2", "g": "12", "crf": "18"})


def mpeg4_avi(path, frames=FRAMES):
    return _encode(path, "mpeg4", range(frames), {"bf": "2", "g": "12", "qscale": "3"})


def wrong_count_avi(path):
    """An AVI whose header (avih dwTotalFrames, strh dwLength) says twice the frames it holds."""
    mpeg4_avi(path)
    raw = bytearray(open(path, "rb").read())
    # offsets from the tag: fourcc + size + fields
    for tag, offset in ((b"avih", 24), (b"strh", 40)):
        at = raw.find(tag)
        n = int.from_bytes(raw[at + offset : at + offset + 4], "little")
        assert n == FRAMES, (tag, n)
        raw[at + offset : at + offset + 4] = (2 * n).to_bytes(4, "little")
    open(path, "wb").write(bytes(raw))
    return path


TRAPS = {
    "h264_long_gop.mp4": h264_long_gop,
    "start_offset.mkv": start_offset,
    "start_offset.mp4": start_offset,
    "vfr.mkv": vfr,
    "edit_list.mp4": edit_list,
    "mpeg4.avi": mpeg4_avi,
    "h264.avi": h264_avi,
    "wrong_count.avi": wrong_count_avi,
}


def truncated(path):
    h264_long_gop(path)
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[: len(raw) * 6 // 10])  # the index (moov) is at the end: gone
    return path


def audio_only(path):
    with av.open(path, "w") as out:
        s = out.add_stream("aac", rate=16000)
        for k in range(10):
            f = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
            )
            f.sample_rate, f.pts = 16000, k * 1024
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode(None):
            out.mux(p)
    return path


def no_frames(path):
    """A video stream whose every packet is garbage: nothing decodes."""
    return _encode(path, "mpeg4", range(20), {"g": "5"}, mangle=lambda i, b: bytes(len(b)))


def broken_middle(path):
    """Packets 30-34 (mid-file, decode order) replaced by zeros: they decode to nothing, so a
    sequential decode has fewer frames than the file has packets, and frames after them move."""
    return _encode(
        path,
        "mpeg4",
        range(FRAMES),
        {"g": "12"},
        mangle=lambda i, b: bytes(len(b)) if 30 <= i < 35 else b,
    )


BAD = {
    "truncated.mp4": truncated,
    "audio_only.mp4": audio_only,
    "no_frames.avi": no_frames,
    "broken_middle.avi": broken_middle,
}


def make_all(folder, which=None):
    """Write every video of TRAPS and BAD (or the names in `which`) into folder -> {name: path}."""
    os.makedirs(folder, exist_ok=True)
    makers = {**TRAPS, **BAD}
    return {name: makers[name](os.path.join(folder, name)) for name in (which or makers)}


def sequential(path):
    """Every frame of a plain decode from the start (PyAV, as `prepare.py extract`) -> list of RGB
    arrays."""
    with av.open(path) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
