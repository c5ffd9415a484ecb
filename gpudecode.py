"""Decoding on the device (--decode_device cuda): the loader ships a clip's frame files undecoded
(EncodedClip, `collate_encoded`), and `decode_batch` decodes a whole batch at once on the GPU
(nvJPEG, NVDEC) and replays the dataset's `load_clip` on the decoded frames, with the generator the
loader had.

References
- TorchCodec (pytorch/torchcodec, src/torchcodec/decoders/_image_decoders.py): batched nvJPEG
  decoding of a list of JPEGs on CUDA.
"""

import copy
import dataclasses
import io
import math

import numpy as np
import torch
from PIL import Image

import decode

# decode_batch: bytes of full-size frames per batched GPU decode (1080p: ~170)
DECODE_CHUNK = 1 << 30


def _encoded_size(blob):
    """(H, W) from an image file's header without decoding it: JPEG by its SOF marker (a few us;
    Pillow takes ~50 us), other formats by Pillow. None if unreadable."""
    if blob[:3] != b"\xff\xd8\xff":
        with Image.open(io.BytesIO(blob)) as img:
            return img.height, img.width
    k = 2
    # segments: FF <marker> <2-byte big-endian length including itself> ...
    while k + 9 <= len(blob):
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


def defer_clip(dataset, video, rng):
    """Bytes mode (--decode_device): -> (EncodedClip, {}). The frames load_clip would read (its
    first step, dataset.choose_frames) are read from their files but not decoded; the clip keeps a
    copy of `rng` as load_clip got it, and decode_batch, after decoding, replays load_clip with it:
    the same draws, the same code, so bytes mode cannot drift from the normal path (a load_clip that
    chose other frames on replay is an error there)."""
    replay = copy.deepcopy(rng)
    numbers = tuple(int(i) for i in np.unique(dataset.choose_frames(video, rng)))
    # the whole file; opened (not decoded) here: bad ones are replaced
    if decode.is_video_file(video.path):
        try:
            data = decode.read_encoded(video.path)
        except OSError:
            raise decode.BadVideo(video, video.path, "missing file") from None
        dataset.read_video(video, [], data)
        return EncodedClip(video, numbers, (video.path,), data, (0, data.numel()), replay), {}
    paths = tuple(dataset.frame_path(video, i) for i in numbers)
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
            dataset.load_frames(video, [numbers[0], i] if size is not None else [i])
        size = size or hw
    offsets = np.cumsum([0] + [len(b) for b in blobs]).tolist()
    data = torch.frombuffer(bytearray(b"".join(blobs)), dtype=torch.uint8)
    return EncodedClip(video, numbers, paths, data, tuple(offsets), replay), {}


@dataclasses.dataclass
class EncodedClip:
    """One item in bytes mode (--decode_device): the undecoded frame files load_clip chose, and a
    copy of its generator for decode_batch to replay load_clip after decoding. `data` is all the
    files, one after another (one tensor: one shared-memory handle per clip from a DataLoader
    worker); frame k is data[offsets[k]:offsets[k + 1]]."""

    video: object  # data.Video
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
    """A batch of EncodedClips (from collate_encoded) -> the batch that data.collate would have
    given, its clips decoded and cropped on `device`: (clips, labels[, info]), clips uint8 (B, [V,]
    3, T, c, c) in channels_last_3d memory on `device`; labels stay where they are. Whole clips'
    JPEGs are decoded in batched calls (nvJPEG on CUDA, batched: TorchCodec, else torchvision) of <=
    DECODE_CHUNK bytes of frames (a batch of 1080p at once: ~6 GB); then each clip is
    `dataset.load_clip` (the loader's) replayed on the decoded frames with the generator it had in
    the loader: the same crops and flips, run on the device. On the CPU this is exactly the normal
    path (tested); on CUDA, nvJPEG's pixels and the float resize differ by a few levels. Video files
    are decoded one by one, on `device` with TorchCodec (NVDEC on CUDA), else on the CPU and
    copied."""
    encoded, labels, *info = batch
    device = torch.device(device)
    clips, infos, chunk, size = [], [], [], 0
    for n, e in enumerate(encoded):
        chunk, size = chunk + [e], size + _decoded_bytes(e)
        if n + 1 < len(encoded) and size + _decoded_bytes(encoded[n + 1]) <= DECODE_CHUNK:
            continue
        jpegs = [c for c in chunk if not decode.is_video_file(c.video.path)]
        frames = _decode_on(
            device,
            [f for c in jpegs for f in c.frames()],
            [(c.video, p) for c in jpegs for p in c.paths],
        )
        # cropped here: the chunk's full-size frames are freed before the next decode
        for e in chunk:
            if decode.is_video_file(e.video.path):
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
                        raise decode.BadVideo(e.video, path, decode._size_change(f, mine[0]))
                return mine

            clip, clip_info = dataset.load_clip(e.video, copy.deepcopy(e.rng), read=read)
            clips.append(clip.movedim(-4, -1))  # as collate stacks: the interleaved memory as it is
            infos.append(clip_info)
        chunk, size = [], 0
    out = torch.stack(clips).movedim(-1, -4)
    if not info:
        return out, labels
    # e.g. info["box"], drawn on replay
    extra = torch.utils.data.default_collate(infos) if infos[0] else {}
    return out, labels, {**info[0], **extra}


def _decoded_bytes(e):  # from the first frame's JPEG header (a few us); else counted as 1080p
    size = decode.is_jpeg(e.frames()[0]) and _encoded_size(e.frames()[0].numpy().tobytes())
    return 3 * len(e.numbers) * math.prod(size or (1080, 1920))


def _decode_on(device, blobs, where):
    """Encoded frames (1-D uint8 CPU tensors) -> uint8 (3, H, W) tensors on `device`: decode_frame
    on the CPU; on CUDA, the JPEGs in one batched nvJPEG call, anything else on the CPU and
    copied."""
    if device.type == "cpu":
        out = []
        for b, (video, path) in zip(blobs, where):
            try:
                out.append(decode.decode_frame(b).permute(2, 0, 1))
            except (OSError, RuntimeError) as err:
                raise decode.BadVideo(
                    video, path, f"unreadable frame: {decode._why(err)}"
                ) from None
        return out
    jpeg = [k for k, b in enumerate(blobs) if decode.is_jpeg(b)]
    out = [None] * len(blobs)
    decode_jpegs = decode.codec_decode_jpeg or (
        decode.tv_decode_jpeg
        and (
            lambda x, mode, device: decode.tv_decode_jpeg(
                x, mode=decode.ImageReadMode.RGB, device=device
            )
        )
    )
    if jpeg and not decode_jpegs:
        raise RuntimeError(
            f"decoding on {device} needs TorchCodec (pip install 'torchcodec>=0.16')"
        )
    try:
        decoded = decode_jpegs([blobs[k] for k in jpeg], mode="RGB", device=device) if jpeg else []
    # never frame by frame: that re-decodes everything, slowly, to no end
    except torch.OutOfMemoryError:
        raise
    except Exception:  # one bad file fails the whole call (RuntimeError, ValueError, ...): name it
        for k in jpeg:
            try:
                decode_jpegs([blobs[k]], mode="RGB", device=device)
            except Exception as err:
                raise (
                    err
                    if isinstance(err, torch.OutOfMemoryError)
                    else decode.BadVideo(
                        *where[k], f"unreadable frame on {device}: {decode._why(err)}"
                    )
                ) from None
        raise
    for k, img in zip(jpeg, decoded):
        out[k] = img
    for k in set(range(len(blobs))) - set(jpeg):
        out[k] = _decode_on(torch.device("cpu"), [blobs[k]], [where[k]])[0].to(device)
    return out
