"""Diagnostics for the CUDA-only failures of tests/test_gpu.py (run by tests/gpu_check.sh on a GPU machine).
Each section prints one verdict line starting with VERDICT. Not a test file: pytest does not collect it."""

import sys
import tempfile
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
import prepare  # noqa: E402
import train  # noqa: E402
import model  # noqa: E402
import zoo  # noqa: E402
from conftest import TINY  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke run of this script only
GPU = [*TINY[:-1], DEV]
FP16 = ["--amp", "fp16", "-b", "2", "--iter_size", "2", "--clip-grad", "0.5", "--epochs", "2"]


def lists():
    out = Path(tempfile.mkdtemp())
    tr, va = prepare.make_synth(out / "d", classes=4, videos=8, frames=10, size=(48, 40))
    return [str(tr), str(va)], out


def run(argv):
    """train.main in-process; returns 'ok' or the SystemExit code."""
    try:
        train.main(train.parse_args(argv))
        return "ok"
    except SystemExit as e:
        return f"exit {e.code}"


def fp16_trace(lazy_momentum):
    """Per step: found_inf, scale before/after, clip norm, momentum buffers. lazy_momentum: the code before
    the fix (buffers made by fused SGD's first step, empty_like)."""
    real_make, real_unscale, real_update = (
        train.make_optimizer,
        torch.amp.GradScaler.unscale_,
        torch.amp.GradScaler.update,
    )
    real_clip, rows = torch.nn.utils.clip_grad_norm_, []

    def make(model, args, fused):
        opt = real_make(model, args, fused)
        for s in opt.state.values() if lazy_momentum else ():
            s.pop("momentum_buffer", None)
        TRACE["opt"] = opt
        return opt

    def unscale(self, opt):
        real_unscale(self, opt)
        fi = self._per_optimizer_states[id(opt)]["found_inf_per_device"]
        rows.append({"found_inf": sum(v.item() for v in fi.values()), "scale": self.get_scale()})

    def clip(p, m):
        n = real_clip(p, m)
        rows[-1]["norm"] = n.item()
        return n

    def update(self, new_scale=None):
        real_update(self, new_scale)
        bufs = [s["momentum_buffer"] for s in TRACE["opt"].state.values() if "momentum_buffer" in s]
        rows[-1]["scale_after"] = self.get_scale()
        rows[-1]["buf_absmax"] = max((b.abs().max().item() for b in bufs), default=None)
        rows[-1]["buf_finite"] = all(b.isfinite().all().item() for b in bufs)
        print("   step", len(rows) - 1, rows[-1], flush=True)

    train.make_optimizer, torch.amp.GradScaler.unscale_ = make, unscale
    torch.amp.GradScaler.update, torch.nn.utils.clip_grad_norm_ = update, clip
    try:
        (lst, out), tag = lists(), "lazy (before the fix)" if lazy_momentum else "zeros (fix)"
        print(f"-- fp16 trace, momentum buffers {tag}", flush=True)
        result = run(["ucf101", *lst, *GPU, *FP16, "--output_root", str(out)])
    finally:
        train.make_optimizer, torch.amp.GradScaler.unscale_ = real_make, real_unscale
        torch.amp.GradScaler.update, torch.nn.utils.clip_grad_norm_ = real_update, real_clip
    print(f"   result: {result}", flush=True)
    return result, rows


TRACE = {}


def check_fp16():
    before, rows_b = fp16_trace(lazy_momentum=True)
    after, rows_a = fp16_trace(lazy_momentum=False)
    first_skipped = bool(rows_b) and rows_b[0]["found_inf"] > 0
    confirmed = first_skipped and before != "ok" and after == "ok"
    print(
        f"VERDICT fp16: first step skipped by GradScaler={first_skipped}; before the fix: {before} "
        f"(run 1 had NaN -> exit 1); with the fix: {after}; mechanism (garbage momentum after a skipped "
        f"first step) {'CONFIRMED' if confirmed else 'NOT confirmed'}"
    )


def repeat_equal(fn, n=5):
    """fn() n times: the same bits every time (NaN included)?"""
    outs = [[t.contiguous().view(torch.uint8) for t in fn()] for _ in range(n)]
    return all(all(torch.equal(a, b) for a, b in zip(outs[0], o)) for o in outs[1:])


def pool_grad(pool, dtype):
    g = torch.Generator(DEV).manual_seed(0)
    x = torch.randn(4, 64, 4, 16, 16, device=DEV, generator=g).to(dtype).requires_grad_()
    gy = torch.randn(pool(x).shape, device=DEV, generator=g).to(dtype)
    return lambda: torch.autograd.grad(pool(x), x, gy)


def model_grads(pool):
    torch.manual_seed(0)
    net = zoo.build_model("resnet10_3d", 101).to(DEV)
    net.maxpool = pool
    x = torch.randn(4, 3, 4 if DEV == "cuda" else 8, 32, 32, device=DEV)  # CPU bf16: T >= kernel
    y = torch.randint(0, 101, (4,), device=DEV)

    def step():
        with torch.autocast(DEV, dtype=torch.bfloat16):
            loss = F.cross_entropy(net(x), y)
        return torch.autograd.grad(loss, list(net.parameters()))

    return step


def check_determinism():
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
    pool, frame_pool = torch.nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)), model.FrameMaxPool(1)
    x = torch.randn(2, 8, 4, 16, 16, device=DEV)
    print("-- FrameMaxPool == MaxPool3d forward:", torch.equal(frame_pool(x), pool(x)))
    res = {}
    for dt in (torch.float32, torch.bfloat16):
        res[f"MaxPool3d bwd {dt}"] = repeat_equal(pool_grad(pool, dt))
        res[f"FrameMaxPool bwd {dt}"] = repeat_equal(pool_grad(frame_pool, dt))
    res["resnet10_3d bf16 grads, MaxPool3d"] = repeat_equal(model_grads(pool))
    res["resnet10_3d bf16 grads, frame pool"] = repeat_equal(model_grads(frame_pool))
    for k, v in res.items():
        print(f"   bitwise repeatable over 5 runs: {k}: {v}")
    torch.use_deterministic_algorithms(True, warn_only=True)
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        model_grads(pool)()
    torch.use_deterministic_algorithms(False)
    flagged = sorted(
        {str(m.message).split(" does not")[0] for m in w if "determin" in str(m.message)}
    )
    print("   use_deterministic_algorithms flags in one resnet10_3d step:", flagged)
    print(
        "VERDICT determinism: MaxPool3d backward repeatable="
        f"{res['resnet10_3d bf16 grads, MaxPool3d']}, with the frame pool="
        f"{res['resnet10_3d bf16 grads, frame pool']}"
    )


def check_resume():
    """The resume test's runs plus a straight twin: at the start of epoch 2, the straight run and the resumed
    one should hold the same weights and RNG states; the two straight runs the same final weights."""
    import conftest

    real_setup, real_epoch, seen = train.setup_runtime, train.train_one_epoch, {}

    def setup(args):
        rt = real_setup(args)
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
        return rt

    def epoch(args, rt, d, net, criterion, progress):
        state = {k: v.detach().clone() for k, v in net.bare.state_dict().items()}
        cuda_rng = torch.cuda.get_rng_state_all() if DEV == "cuda" else []
        seen[(args.output_root, progress.epoch)] = (state, cuda_rng, torch.get_rng_state())
        return real_epoch(args, rt, d, net, criterion, progress)

    train.setup_runtime, train.train_one_epoch = setup, epoch
    lst, out = lists()
    amp = "bf16" if DEV == "cuda" else "off"
    argv = ["ucf101", *lst, *GPU, "--dro", "0.5", "--amp", amp]
    try:
        for root, extra in (("a", ["--epochs", "3"]), ("x", ["--epochs", "3"])):
            print(f"   run {root}: {run([*argv, *extra, '--output_root', str(out / root)])}")
        for extra in (["--epochs", "2"], ["--epochs", "3", "--resume", "auto"]):
            print(f"   run b {extra}: {run([*argv, *extra, '--output_root', str(out / 'b')])}")
    finally:
        train.setup_runtime, train.train_one_epoch = real_setup, real_epoch
    final = {r: conftest.weights(conftest.run_dir(out / r, argv) / "checkpoint.pth") for r in "axb"}
    (wa, ca, ta), (wb, cb, tb) = seen[(str(out / "a"), 2)], seen[(str(out / "b"), 2)]
    n_diff = lambda p, q: sum(not torch.equal(p[k], q[k]) for k in p)  # noqa: E731
    rng_equal = all(torch.equal(p, q) for p, q in zip(ca, cb)), torch.equal(ta, tb)
    print(
        f"   at the start of epoch 2, straight a vs resumed b: weights differ in {n_diff(wa, wb)} tensors, "
        f"CUDA RNG equal={rng_equal[0]}, CPU RNG equal={rng_equal[1]}"
    )
    print(
        f"VERDICT resume: final a vs x (two straight runs) differ in {n_diff(final['a'], final['x'])} "
        f"tensors; a vs b (resumed) in {n_diff(final['a'], final['b'])} (0 and 0: fixed)"
    )


if __name__ == "__main__":
    print(torch.__version__, DEV, torch.cuda.get_device_name() if DEV == "cuda" else "", flush=True)
    for check in (check_fp16, check_determinism, check_resume):
        try:
            check()
        except Exception:
            traceback.print_exc()
            print(f"VERDICT {check.__name__}: crashed (traceback above)")
