"""GPU readiness (item by item: the step never syncs between prints, all CUDA RNG states, decoder
errors, bounded batched decoding, compile, DDP). Tests named test_cuda_* need CUDA and are skipped
without it (2-GPU ones below 2 GPUs); `python bench.py gpu` runs them all (pytest -k cuda). The rest
run on a CPU."""

import subprocess
import sys

import pytest
import torch

import checkpoint
import data
import decode
import gpudecode
import prepare
import report
import train
from conftest import ENV, REPO, TINY, cuda, run_dir, run_main, weights

two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
GPU = [*TINY[:-1], "cuda"]  # TINY ends with --device cpu


def cli(argv, nproc=None, timeout=600):
    launch = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
        if nproc
        else [sys.executable]
    )
    return subprocess.run(
        [*launch, str(REPO / "train.py"), *argv],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=timeout,
    )


# ---- on any machine ------------------------------------------------------------------------------
def test_sync_bn_without_ddp_is_one_line(lists, tmp_path, capsys):  # noqa: F811
    with pytest.raises(SystemExit) as e:
        run_main(["ucf101", *lists, *TINY, "--sync-bn", "--output_root", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "--sync-bn needs --ddp" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "error", [ValueError("bad Huffman table"), KeyError("x"), torch.OutOfMemoryError("oom")]
)
def test_gpu_decode_error_of_any_type_saves_and_is_one_line(monkeypatch, capsys, error):
    saved = []
    monkeypatch.setattr(gpudecode, "decode_batch", lambda *a: (_ for _ in ()).throw(error))
    monkeypatch.setattr(checkpoint, "save", lambda *a: saved.append(a[3].iter))
    rt, progress = type("RT", (), {"world_size": 1, "device": None})(), checkpoint.Progress()
    args = type("A", (), {"iter_size": 2})()
    with pytest.raises(SystemExit) as e:
        train.decode_on_device(
            None, args, rt, None, progress, type("D", (), {"train_ds": None})(), 5
        )
    err = capsys.readouterr().err.strip()
    # the step's boundary
    assert e.value.code == 2 and saved == [4] and len(err.splitlines()) == 1, err
    assert ("out of GPU memory" in err) == isinstance(error, torch.OutOfMemoryError)


@pytest.fixture(scope="module")
def encoded_batch(tmp_path_factory):
    train_list, _ = prepare.make_synth(
        tmp_path_factory.mktemp("enc"), classes=2, videos=4, frames=10, size=(48, 40)
    )
    ds = data.VideoFrameDataset(
        train_list, t_length=4, t_stride=2, new_size=36, crop_size=32, encoded=True
    )
    return ds, gpudecode.collate_encoded([ds[i] for i in range(4)])


def test_decode_batch_goes_in_bounded_chunks(monkeypatch, encoded_batch):
    ds, batch = encoded_batch
    whole = gpudecode.decode_batch(batch, "cpu", ds)
    calls, real = [], gpudecode._decode_on
    monkeypatch.setattr(
        gpudecode,
        "_decode_on",
        lambda dev, blobs, where: calls.append(len(blobs)) or real(dev, blobs, where),
    )
    # two clips of 4 frames of 48x40
    monkeypatch.setattr(gpudecode, "DECODE_CHUNK", 2 * 3 * 48 * 40 * 4)
    chunked = gpudecode.decode_batch(batch, "cpu", ds)
    assert (
        calls == [8, 8]
        and torch.equal(whole[0], chunked[0])
        and torch.equal(whole[2]["box"], chunked[2]["box"])
    )


def test_batched_gpu_decode_oom_is_not_redone_frame_by_frame(monkeypatch, encoded_batch):
    # The CUDA branch of _decode_on with a stand-in decoder (no GPU touched): an OOM in the batched
    # call propagates at once; any other error (here a ValueError) is found file by file and named.
    _, batch = encoded_batch
    blobs = [f for e in batch[0] for f in e.frames()]
    where = [(e.video, p) for e in batch[0] for p in e.paths]
    for error, expect in (
        (torch.OutOfMemoryError("CUDA out of memory"), torch.OutOfMemoryError),
        (ValueError("corrupt"), decode.BadVideo),
    ):
        calls = []

        def fake_decode(x, mode, device, error=error):
            calls.append(len(x))
            if len(x) > 1 or x[0] is blobs[3]:
                raise error
            return [torch.zeros(3, 2, 2, dtype=torch.uint8)]

        monkeypatch.setattr(decode, "codec_decode_jpeg", fake_decode)
        with pytest.raises(expect) as e:
            gpudecode._decode_on(torch.device("cuda"), blobs, where)
        if expect is decode.BadVideo:
            assert calls == [16, 1, 1, 1, 1] and where[3][1] in str(e.value)
        else:
            assert calls == [16]


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU, bench.py gpu runs everything")
def test_bench_gpu_without_cuda_is_one_line_exit_2():
    r = subprocess.run(
        [sys.executable, str(REPO / "bench.py"), "gpu"],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=120,
    )
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2 and len(out.splitlines()) == 1 and "no CUDA GPU" in out, out


def test_fused_sgd_first_step_skipped_by_grad_scaler_leaves_no_garbage(monkeypatch):
    # fp16's first step usually overflows at GradScaler's initial scale: fused SGD (what CUDA runs,
    # here on the CPU) skips its kernel on the found-inf flag. Its lazily made momentum buffers are
    # empty_like: NaN-filled here, what uninitialised memory may hold. The next step must equal a
    # plain first step.
    args = train.parse_args(["ucf101", "x", "y", *TINY, "--wd", "0.001"])
    monkeypatch.setattr(torch, "empty_like", lambda t, **k: torch.full_like(t, float("nan"), **k))
    torch.manual_seed(0)
    model, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    ref = torch.nn.Linear(4, 3)
    ref.load_state_dict(model.state_dict())
    opt, scaler = train.make_optimizer(model, args, fused=True), torch.amp.GradScaler("cpu")
    for overflow in (True, False):
        scaler.scale(model(x).sum() * (float("inf") if overflow else 1)).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    ref_opt = train.make_optimizer(ref, args, fused=True)  # one step, nothing skipped
    ref(x).sum().backward()
    ref_opt.step()
    assert scaler.get_scale() == 32768.0  # the first step was skipped, the second taken
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), ref.parameters()))


# ---- CUDA only -----------------------------------------------------------------------------------
@cuda
@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--amp", "fp16", "--iter_size", "2", "-b", "2", "--clip-grad", "1"],
        ["--amp", "bf16", "--channels-last"],
    ],
)
# noqa: F811
def test_cuda_steps_never_sync_the_host_between_prints(lists, tmp_path, monkeypatch, extra):
    # Every step but the first (cuDNN autotuning) runs under sync debug mode "error": an .item(),
    # .tolist(), a blocking copy or a stream sync raises. The progress line (print time) is the one
    # place allowed.
    real_loader, real_line = train.train_loader, report.Meter.line

    def loader(*a, **k):
        batches = iter(real_loader(*a, **k))
        yield next(batches)
        torch.cuda.set_sync_debug_mode("error")
        try:
            yield from batches
        finally:
            torch.cuda.set_sync_debug_mode(0)

    def line(self, *a, **k):
        torch.cuda.set_sync_debug_mode(0)
        try:
            return real_line(self, *a, **k)
        finally:
            torch.cuda.set_sync_debug_mode("error")

    monkeypatch.setattr(train, "train_loader", loader)
    monkeypatch.setattr(report.Meter, "line", line)
    # 16 videos: 4 steps of 4 (or 8 of 2), one line per epoch (-p 100)
    train_list, val_list = prepare.make_synth(
        tmp_path / "d", classes=4, videos=16, frames=10, size=(48, 40)
    )
    run_main(
        [
            "ucf101",
            str(train_list),
            str(val_list),
            *GPU,
            "-p",
            "100",
            "--epochs",
            "1",
            "--output_root",
            str(tmp_path),
            *extra,
        ]
    )
    torch.cuda.set_sync_debug_mode(0)


@cuda
def test_cuda_fp16_iter_size_clip_grad_trains(lists, tmp_path, monkeypatch):  # noqa: F811
    # GradScaler skips a step whose gradients overflow fp16 and halves its scale: normal in the
    # first steps (initial scale 65536; this stem's weight gradient is > 1 per unit of loss). A
    # skipped step's norm is inf; a taken step's is finite and unscaled, and only the first steps
    # may be skipped.
    norms, scales, real, update = (
        [],
        [],
        torch.nn.utils.clip_grad_norm_,
        torch.amp.GradScaler.update,
    )
    monkeypatch.setattr(
        torch.nn.utils, "clip_grad_norm_", lambda p, m: norms.append(real(p, m)) or norms[-1]
    )
    monkeypatch.setattr(
        torch.amp.GradScaler,
        "update",
        lambda self: (
            scales.append(self.get_scale()) or update(self) or scales.append(self.get_scale())
        ),
    )
    argv = [
        "ucf101",
        *lists,
        *GPU,
        "--amp",
        "fp16",
        "-b",
        "2",
        "--iter_size",
        "2",
        "--clip-grad",
        "0.5",
        "--epochs",
        "2",
        "--output_root",
        str(tmp_path),
    ]
    run_main(argv)
    ckpt = torch.load(run_dir(tmp_path, argv) / "checkpoint.pth", weights_only=False)
    skipped = [after < before for before, after in zip(scales[::2], scales[1::2])]
    assert len(norms) == len(skipped) == 4  # 2 steps x 2 epochs
    assert [not torch.isfinite(n) for n in norms] == skipped, (norms, scales)
    # The scale halves on each overflow and may overflow again later (on an H100: steps 0 and 2 of
    # 4); each epoch still takes a step, and the taken ones are unscaled.
    assert not all(skipped[:2]) and not all(skipped[2:]), (norms, scales)
    taken = [n.item() for n, s in zip(norms, skipped) if not s]
    assert max(taken) < 1e3  # a scaled norm would be ~65536x larger
    assert ckpt["scaler"]["scale"] > 0 and all(
        torch.isfinite(v).all() for v in ckpt["model"].values()
    )


@cuda
def test_cuda_resume_is_exact_with_dropout(lists, tmp_path, monkeypatch):  # noqa: F811
    # Deterministic kernels (cuDNN autotuning can pick other algorithms per run), then: 3 epochs
    # straight == 2 epochs + resume, bit for bit, dropout 0.5 drawing from the CUDA generators saved
    # in between.
    real_setup = train.setup_runtime

    def setup(args):
        rt = real_setup(args)
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
        return rt

    monkeypatch.setattr(train, "setup_runtime", setup)
    argv = ["ucf101", *lists, *GPU, "--dro", "0.5", "--amp", "bf16"]
    run_main([*argv, "--epochs", "3", "--output_root", str(tmp_path / "a")])
    run_main([*argv, "--epochs", "2", "--output_root", str(tmp_path / "b")])
    run_main([*argv, "--epochs", "3", "--output_root", str(tmp_path / "b"), "--resume", "auto"])
    a, b = (weights(run_dir(tmp_path / r, argv) / "checkpoint.pth") for r in "ab")
    assert all(torch.equal(a[k], b[k]) for k in a)
    ckpt = torch.load(run_dir(tmp_path / "b", argv) / "checkpoint.pth", weights_only=False)
    assert len(ckpt["rng"][0]["cuda"]) == torch.cuda.device_count()  # every GPU's generator


@cuda
@two_gpus
def test_cuda_ddp_nccl_two_processes(lists, tmp_path):  # noqa: F811
    r = cli(
        [
            "ucf101",
            *lists,
            *GPU,
            "-b",
            "2",
            "--ddp",
            "--sync-bn",
            "--epochs",
            "2",
            "--output_root",
            str(tmp_path),
        ],
        nproc=2,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 process(es)" in r.stdout and "Acc@1" in r.stdout


@cuda
@pytest.mark.parametrize("nproc", [1, pytest.param(2, marks=two_gpus)])
def test_cuda_compile_with_ddp(lists, tmp_path, nproc):  # noqa: F811
    r = cli(
        [
            "ucf101",
            *lists,
            *GPU,
            "-b",
            str(4 // nproc),
            "--ddp",
            "--compile",
            "--epochs",
            "2",
            "--output_root",
            str(tmp_path),
        ],
        nproc=nproc,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Acc@1" in r.stdout
