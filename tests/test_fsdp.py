"""--fsdp (fsdp.py): 2 gloo processes train as 2 with --ddp; sharded checkpoints resume exactly (an
epoch boundary, SIGTERM mid-epoch, on 2 processes and on 1), a SIGKILL inside a sharded save leaves
the previous checkpoint whole, and an --fsdp run's checkpoint.pth serves --evaluate, predict,
features and export (the slow tier). Fast: the flags --fsdp refuses, the sharding rule, the memory
table's measurement. All real processes (torchrun, or two processes given torchrun's variables),
each with a timeout; the model is vit_t16 at 4 frames x 32 px (LayerNorm: a step's gradient does
not depend on how its clips are split over processes, so a 2 -> 1 resume can be compared).

    RUN_SLOW=1 python -m pytest -q tests/test_fsdp.py
"""

import contextlib
import copy
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest
import torch

import bench
import flags
import fsdp
import jepa
import model as models
import train
from conftest import ENV, REPO, TINY, assert_same_weights, logs, one_line_error, run_cli, run_main
from conftest import weights

# 8 train videos, -b 1 on 2 processes: 4 optimizer steps an epoch (of 2 clips); no dropout
VIT = ["--arch", "vit_t16", "--t_length", "4", "--t_stride", "2", "--new_size", "36"]
VIT += ["--crop_size", "32", "-b", "1", "--lr", "0.01", "--dro", "0", "-j", "0", "-p", "1"]
VIT += ["-ef", "1", "--device", "cpu", "--num_classes", "4", "--epochs", "2"]
NAME = "ucf101_vit_t16_3D_length4_stride2_dropout0.0"
# V-JEPA pretraining (jepa.py) added to either: a 3 x 3 token grid (48 px), a 1-block predictor
JEPA = ["--pretrain", "--objective", "vjepa", "--arch", "vjepa2_vitt16", "--new_size", "48"]
JEPA += ["--crop_size", "48", "--opt", "adamw", "--lr", "1e-3", "--pred-depth", "1"]
JEPA += ["--pred-width", "96", "--pred-heads", "3"]
JEPA_NAME = "ucf101_vjepa2_vitt16_pretrain_vjepa_length4_stride2"


def torchrun(script, *argv, nproc=2, env=None, timeout=300):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += [f"--nproc_per_node={nproc}", str(script), *argv]
    kw = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or ENV, cwd=REPO)
    with subprocess.Popen(cmd, **kw) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # a hang: the workers go too (torchrun starts each in a session of its own, and they
            # hold the pipes open), then the launcher
            for pid in [*descendants(p.pid), p.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            p.communicate()
            raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def descendants(pid):
    """The processes below `pid` (Linux's /proc; elsewhere none)."""
    children = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError):
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def fsdp_run(lists, out, *extra, nproc=2, timeout=300):
    r = torchrun(
        REPO / "train.py",
        "ucf101",
        *lists,
        *VIT,
        "--fsdp",
        *extra,
        "--output_root",
        str(out),
        nproc=nproc,
        timeout=timeout,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def reference(lists, tmp_path_factory):
    """The uninterrupted 2-process --fsdp run (2 epochs): its run folder."""
    out = tmp_path_factory.mktemp("reference")
    fsdp_run(lists, out)
    return out / NAME


@pytest.fixture(scope="module")
def first_epoch(lists, tmp_path_factory):
    """The same run stopped after its first epoch (--epochs 1): its run folder."""
    out = tmp_path_factory.mktemp("first")
    fsdp_run(lists, out, "--epochs", "1")
    return out / NAME


@pytest.fixture(scope="module")
def jepa_reference(lists, tmp_path_factory):
    """The uninterrupted 2-process --fsdp V-JEPA pretraining run (2 epochs): its run folder."""
    out = tmp_path_factory.mktemp("jepa_reference")
    fsdp_run(lists, out, *JEPA)
    return out / JEPA_NAME


def max_difference(a, b):
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch, recipe",
    [
        (["--arch", "resnet10_3d"], ["--epochs", "2"]),  # BatchNorm, SGD with momentum
        (
            ["--arch", "vit_t16", "--num_classes", "4", "--epochs", "2"],
            ["--opt", "adamw", "--wd", "0.05", "--layer-decay", "0.75", "--clip-grad", "1"]
            + ["--iter_size", "2", "--lr", "0.001", "--grad-ckpt"],
        ),
        (["--pretrain", "--arch", "vit_t16", "--opt", "adamw", "--epochs", "1"], ["--lr", "1e-3"]),
        # the context and target encoders and the predictor sharded; the EMA on the local shards
        (["--epochs", "2"], JEPA),
        (
            ["--arch", "vit_t16", "--num_classes", "4", "--epochs", "1", "--opt", "adamw"],
            ["--probe", "attentive", "--probe-blocks", "1", "--probe-heads", "4"]
            + ["--probe-lrs", "1e-3", "3e-4", "--lr_policy", "cosine"],
        ),
    ],
    ids=[
        "resnet10_3d-sgd",
        "vit_t16-adamw-layer_decay-clip_grad-iter_size-grad_ckpt",
        "vit_t16-pretrain",
        "vjepa2_vitt16-pretrain-vjepa",
        "vit_t16-probe",
    ],
)
def test_fsdp_trains_as_ddp(lists, tmp_path, arch, recipe):
    # The same clips and steps: the only difference is how gradients are summed (DDP's all-reduce
    # of whole buckets vs FSDP's reduce-scatter of each unit, per micro-batch) and how the gradient
    # norm is summed (over shards): float rounding. AdamW divides each step by the root of its
    # second moment, which enlarges a rounding difference of a small gradient: 1e-5 (weights ~0.1).
    common = ["ucf101", *lists, *TINY, "-b", "2", *arch, *recipe]
    if "vjepa" in recipe:
        # 7 val videos: the ranks validate 4 and 3, one at a time, so no collective may run per
        # video (fsdp.gathered); a mismatched one would hang until the timeout
        odd = os.path.join(os.path.dirname(lists[1]), "val7.txt")  # the paths are relative
        with open(odd, "w") as f:
            f.writelines(open(lists[1]).readlines()[:7])
        common[2] = odd
    folders = {}
    for mode in ("--fsdp", "--ddp"):
        r = torchrun(REPO / "train.py", *common, mode, "--output_root", str(tmp_path / mode))
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"{mode[2:].upper()}: 2 processes" in r.stdout
        (folders[mode],) = (tmp_path / mode).iterdir()
    a, b = (weights(folders[m] / "checkpoint.pth") for m in ("--fsdp", "--ddp"))
    diff = max_difference(a, b)
    losses = [[e["train_loss"] for e in logs(folders[m])] for m in ("--fsdp", "--ddp")]
    print(f"largest |fsdp - ddp| weight difference {diff:.3g}; train losses {losses}")
    assert diff <= 1e-5
    assert losses[0] == pytest.approx(losses[1], rel=1e-6, abs=0)
    # the sharded state sits beside the ordinary file; the file has the whole model
    shards = [p.name for p in folders["--fsdp"].iterdir() if p.name.startswith("checkpoint.shards")]
    saved = torch.load(folders["--fsdp"] / "checkpoint.pth", weights_only=False)
    assert shards == [saved["shards"]]
    # V-JEPA: the official keys hold the gathered model's tensors (whole, plain), as without --fsdp
    if "vjepa" in recipe:
        val = [[e["val_loss"] for e in logs(folders[m])] for m in ("--fsdp", "--ddp")]
        assert val[0] == pytest.approx(val[1], rel=1e-6, abs=0)
    for name in jepa.OFFICIAL_KEYS if "vjepa" in recipe else ():
        for k, v in saved[name].items():
            whole = saved["model"][name + k.removeprefix("module.backbone")]
            assert type(v) is torch.Tensor and torch.equal(v, whole)


@pytest.mark.slow
@pytest.mark.parametrize("nproc", [2, 1])
def test_resume_at_an_epoch_boundary(lists, tmp_path, reference, first_epoch, nproc):
    # 2 processes: bit for bit. 1 process (-b 2: the same global batch; DistributedSampler gives
    # the 2-process step's two clips to the one process): the same clips in every step, summed in
    # another order, so equal to float rounding. The shards are resharded by DCP on load.
    shutil.copytree(first_epoch, tmp_path / NAME)
    extra = ["--resume", "auto"] + (["-b", "2"] if nproc == 1 else [])
    r = fsdp_run(lists, tmp_path, *extra, nproc=nproc)
    assert "resumed from" in r.stdout and "at epoch 1 iteration 0" in r.stdout
    a, b = weights(reference / "checkpoint.pth"), weights(tmp_path / NAME / "checkpoint.pth")
    if nproc == 2:
        assert_same_weights(a, b)
    else:
        diff = max_difference(a, b)
        print(f"2 -> 1 process resume: largest weight difference {diff:.3g}")
        assert diff <= 1e-5
    assert logs(tmp_path / NAME)[-1]["epoch"] == 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["vit_t16", "vjepa2_vitt16-pretrain-vjepa"])
def test_sigterm_mid_epoch_saves_shards_and_resumes_exactly(lists, tmp_path, request, recipe):
    # Two processes started with torchrun's variables (as srun's tasks are), both sent SIGTERM in
    # the second epoch (a preemption signals every process): they finish the step, save, exit 143.
    # V-JEPA: the target encoder (its EMA) and the momentum schedule's position resume with it.
    extra, name = (JEPA, JEPA_NAME) if "vjepa" in recipe else ([], NAME)
    reference = request.getfixturevalue("jepa_reference" if "vjepa" in recipe else "reference")
    port, argv = free_port(), ["ucf101", *lists, *VIT, *extra, "--fsdp"]
    argv += ["--output_root", str(tmp_path)]
    procs = []
    for rank in (0, 1):
        env = dict(ENV, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(
            subprocess.Popen(
                [sys.executable, str(REPO / "train.py"), *argv],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for line in procs[0].stdout:  # rank 0 prints
            if line.startswith("epoch 1 [1/4]"):
                break
        for p in procs:
            p.send_signal(signal.SIGTERM)
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [143, 143], outs[1][1][-2000:]
    ckpt = torch.load(tmp_path / name / "checkpoint.pth", weights_only=False)
    assert ckpt["epoch"] == 1 and 1 <= ckpt["iter"] < 4 and ckpt["optimizer"] is None
    assert (tmp_path / name / ckpt["shards"] / ".metadata").is_file()
    r = fsdp_run(lists, tmp_path, *extra, "--resume", "auto")
    assert f"at epoch 1 iteration {ckpt['iter']}" in r.stdout
    assert_same_weights(
        weights(reference / "checkpoint.pth"), weights(tmp_path / name / "checkpoint.pth")
    )


@pytest.mark.slow
def test_sigkill_inside_a_sharded_save_keeps_the_last_checkpoint(lists, tmp_path, reference):
    # Rank 1 is killed in the second save (the end of epoch 1), its shard written, the save not
    # complete. checkpoint.pth stays epoch 0's, naming its complete shards; the run resumes from it
    # and ends as the uninterrupted run, bit for bit.
    env = dict(ENV, KILL_AT_SAVE="2", KILL_RANK="1")
    argv = ["ucf101", *lists, *VIT, "--fsdp", "--output_root", str(tmp_path)]
    r = torchrun(REPO / "tests" / "fsdp_kill_in_save.py", *argv, env=env)
    assert r.returncode != 0 and "SIGKILL" in r.stderr, r.stderr[-3000:]
    run = tmp_path / NAME
    assert (run / "checkpoint.shards.tmp").is_dir()  # the killed save's, never named
    assert not (run / "checkpoint.shards.tmp" / ".metadata").exists()
    ckpt = torch.load(run / "checkpoint.pth", weights_only=False)
    assert (ckpt["epoch"], ckpt["iter"]) == (1, 0)
    assert [p.name for p in run.glob("checkpoint.shards-*")] == [ckpt["shards"]]
    r = fsdp_run(lists, tmp_path, "--resume", "auto")
    assert "at epoch 1 iteration 0" in r.stdout
    assert not (run / "checkpoint.shards.tmp").exists()
    assert_same_weights(weights(reference / "checkpoint.pth"), weights(run / "checkpoint.pth"))


@pytest.mark.slow
def test_an_fsdp_checkpoint_serves_evaluate_predict_features_export(lists, tmp_path, first_epoch):
    # checkpoint.pth / model_best.pth are ordinary files holding the whole model: the readers need
    # nothing of the shards. --evaluate on one process scores what the sharded run validated.
    best = str(first_epoch / "model_best.pth")
    r = run_cli(
        [
            "ucf101",
            *lists,
            "--evaluate",
            "--resume",
            best,
            "--output_root",
            str(tmp_path),
            "-j",
            "0",
            "--device",
            "cpu",
        ],
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    top1 = float(r.stdout.split(" * Acc@1 ")[1].split()[0])
    assert top1 == pytest.approx(logs(first_epoch)[0]["val_top1"], abs=1e-6)
    video = os.path.join(os.path.dirname(lists[1]), open(lists[1]).readline().split()[0])
    r = run_cli(["predict", "--resume", best, video, "--json", "--device", "cpu"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["arch"] == "vit_t16" and len(json.loads(r.stdout)["results"]) == 1
    r = run_cli(
        [
            "features",
            lists[1],
            "--resume",
            best,
            "--out",
            str(tmp_path / "f"),
            "-j",
            "0",
            "--window",
            "4",
            "--stride",
            "4",
            "--device",
            "cpu",
        ]
    )
    assert r.returncode == 0 and list((tmp_path / "f").glob("*.npy")), r.stderr[-2000:]
    r = run_cli(["export", "--resume", best, "--format", "pt2", str(tmp_path / "m.pt2")])
    assert r.returncode == 0 and (tmp_path / "m.pt2").is_file(), r.stderr[-2000:]


# ---- fast ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "given, named",
    [
        (["--model-ema"], "--model-ema with --fsdp"),
        (["--compile"], "--compile with --fsdp"),
        (["--amp", "fp16", "--device", "cuda"], "--amp fp16 with --fsdp"),
    ],
)
def test_fsdp_refuses_what_it_cannot_serve_in_one_line(lists, capsys, given, named):
    args = flags.parse_args(["ucf101", *lists, *TINY, "--fsdp", *given])
    if args.device == "cuda" and not torch.cuda.is_available():
        args.device = "cuda"  # check_fsdp reads the flags alone; no GPU is touched
    with pytest.raises(SystemExit) as e:
        flags.check_fsdp(args)
    one_line_error(capsys, named, "drop one of them", exc=e)


def test_each_block_and_stage_is_a_unit_of_its_own():
    with torch.device("meta"):
        vit = models.build_network("vit_t16", 4, t_length=4, crop_size=32)
        resnet = models.build_network("resnet10_3d", 4)
    assert [n for n, _ in fsdp.units(vit)] == [f"blocks.{i}" for i in range(len(vit.blocks))]
    assert sorted(n for n, _ in fsdp.units(resnet)) == ["layer1", "layer2", "layer3", "layer4"]
    # V-JEPA pretraining: both encoders' blocks and the predictor's (built on the CPU: its init
    # reads values; 4 M parameters)
    model = jepa.JEPA("vjepa2_vitt16", 4, 48, pred_depth=2, pred_width=96, pred_heads=3)
    blocks = [f"{part}.blocks.{i}" for part in ("encoder", "target_encoder") for i in range(4)]
    blocks += ["predictor.predictor_blocks.0", "predictor.predictor_blocks.1"]
    assert sorted(n for n, _ in fsdp.units(model)) == sorted(blocks)


def test_vjepa_ema_runs_on_the_shards_and_the_official_keys_are_whole():
    # One process: fully_shard makes every parameter a DTensor (its local shard the whole tensor).
    # The momentum update must change the target encoder's shards in place, as the unsharded
    # model's update changes its tensors; official_state of the gathered state is plain tensors.
    torch.manual_seed(0)
    plain = jepa.JEPA("vjepa2_vitt16", 4, 48, pred_depth=1, pred_width=96, pred_heads=3)
    with torch.no_grad():
        for p in plain.encoder.parameters():  # the encoder trained away from its copy
            p.add_(torch.randn_like(p))
    sharded = copy.deepcopy(plain)
    fsdp.init_single_process()
    try:
        rt = train.Runtime(0, 1, 0, torch.device("cpu"), "", None, torch.contiguous_format)
        fsdp.shard(sharded, flags.parse_args(["ucf101", "a", "b", "--device", "cpu"]), rt)
        assert type(sharded.target_encoder.blocks[0].attn.qkv.weight).__name__ == "DTensor"
        for model in (plain, sharded):
            model.update_target(0.9)
        state = fsdp.full_model_state(sharded)
        official = sharded.official_state(state)
    finally:
        torch.distributed.destroy_process_group()
    assert_same_weights(plain.state_dict(), state)
    assert not torch.equal(state["target_encoder.norm.weight"], state["encoder.norm.weight"])
    ours = plain.official_state(plain.state_dict())
    assert {k: list(v) for k, v in official.items()} == {k: list(v) for k, v in ours.items()}
    assert all(type(v) is torch.Tensor for part in official.values() for v in part.values())


def test_memory_table_is_measured_from_the_shards():
    # vit_t16's 5.5 M parameters: the whole model on 1 rank (DDP's), a half on each of 2 (dim 0
    # chunks, rank 0's rounded up), AdamW's two moments twice the parameters (+ a step count each)
    rows = bench.main(["memory", "--archs", "vit_t16", "--ranks", "1", "2"])
    one, two = (r["fsdp"] for r in rows)
    assert rows[0]["ddp"] == one and one["grads"] == one["params"]
    assert one["params"] / 2 <= two["params"] <= one["params"] / 2 + 4 * 1024
    assert 2 * two["params"] <= two["optimizer"] <= 2 * two["params"] + 4 * 64
    assert two["grads"] == two["params"]


@pytest.mark.slow
def test_a_resume_across_fsdp_and_not_is_one_line(lists, tmp_path, capsys):
    # the optimizer state of an --fsdp run is in its shards: a resume without --fsdp cannot read it;
    # a plain checkpoint has no shards for --fsdp; a shards folder gone is named
    args = ["ucf101", *lists, *TINY, "--epochs", "1"]
    run_main([*args, "--fsdp", "--output_root", str(tmp_path / "f")])
    run_main([*args, "--output_root", str(tmp_path / "p")])
    capsys.readouterr()
    for root, flag, needles in (
        ("f", [], ("was trained with --fsdp", "resume with --fsdp")),
        ("p", ["--fsdp"], ("was trained without --fsdp", "--pretrained")),
    ):
        with pytest.raises(SystemExit) as e:
            run_main(
                [
                    *args,
                    "--epochs",
                    "2",
                    "--output_root",
                    str(tmp_path / root),
                    "--resume",
                    "auto",
                    *flag,
                ]
            )
        one_line_error(capsys, *needles, exc=e)
    (folder,) = (tmp_path / "f").glob("*/checkpoint.shards-*")
    shutil.rmtree(folder)
    with pytest.raises(SystemExit) as e:
        run_main(
            [
                *args,
                "--epochs",
                "2",
                "--output_root",
                str(tmp_path / "f"),
                "--resume",
                "auto",
                "--fsdp",
            ]
        )
    one_line_error(capsys, str(folder), "is missing", exc=e)


def test_fsdp_in_a_slurm_batch_shell_is_refused_as_ddp_is(monkeypatch, capsys):
    # the job's shell has SLURM_JOB_ID but no step: srun must start the processes
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_STEP_ID"):
        monkeypatch.delenv(k, raising=False)
    for k, v in dict(SLURM_JOB_ID="7", SLURM_PROCID="0", SLURM_NTASKS="2").items():
        monkeypatch.setenv(k, v)
    args = flags.parse_args(["ucf101", "a.txt", "b.txt", *TINY, "--fsdp"])
    with pytest.raises(SystemExit) as e:
        train.setup_runtime(args)
    one_line_error(capsys, "--fsdp needs one process per GPU", "batch shell", exc=e)


def test_amp_bf16_computes_in_bf16_and_keeps_fp32_shards_and_gradients():
    # FSDP2's MixedPrecisionPolicy: a block's all-gathered parameters are bf16 in its forward; the
    # shards (the master weights) and their gradients stay fp32
    fsdp.init_single_process()
    try:
        torch.manual_seed(0)
        net = models.build_network("vit_t16", 4, t_length=4, crop_size=32)
        args = flags.parse_args(["ucf101", "a", "b", "--amp", "bf16", "--device", "cpu"])
        rt = train.Runtime(0, 1, 0, torch.device("cpu"), "", None, torch.contiguous_format)
        fsdp.shard(net, args, rt)
        seen = []
        net.blocks[0].register_forward_pre_hook(lambda m, x: seen.append(m.attn.qkv.weight.dtype))
        net(torch.randn(2, 3, 4, 32, 32)).float().sum().backward()
        assert seen == [torch.bfloat16]
        assert {p.dtype for p in net.parameters()} == {torch.float32}
        assert {p.grad.dtype for p in net.parameters() if p.grad is not None} == {torch.float32}
        assert type(net.blocks[0].attn.qkv.weight).__name__ == "DTensor"
    finally:
        torch.distributed.destroy_process_group()
