"""The project as a new user meets it: a mistyped list name, an evaluation's files, a GPU command on
a machine without one, flags that would do nothing, a zoo's checkpoint given to --evaluate, a DDP
features run with a bad video. Each case is what a user types; the fault paths run in subprocesses
with timeouts."""

import os
import re
import subprocess
import sys

import pytest
import torch

import flags
import train
from conftest import ENV, REPO, TINY, one_line_error, run_main, tiny_checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import videos  # noqa: E402  (tests/videos.py, beside this file)

# The original project's command, verbatim (its README), as the docstring of train.py gives it.
ORIGINAL = (
    "ucf101 train.txt val.txt --arch resnet50_3d --dro 0.2 --mode 3D --t_length 16 --t_stride 4 "
    "--pretrained --epochs 95 --batch-size 64 --lr 0.001 --lr_steps 40 80 90 --workers 16 "
    "--image_tmpl img_{:05d}.jpg"
).split()
no_gpu = pytest.mark.skipif(
    torch.cuda.is_available(), reason="needs a machine without a visible GPU"
)


def train_cli(argv, cwd, **env):
    """python train.py ARGV, started (not waited for) in cwd with env added: a Popen, to run several
    at once (each pays seconds of imports)."""
    return subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), *argv],
        cwd=cwd,
        env={**ENV, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(p, timeout=180):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


# ---- the demo writes only into its own folder ----------------------------------------------------
@pytest.mark.slow
def test_demo_with_a_mistyped_list_leaves_the_users_files_alone(tmp_path):
    (tmp_path / "val.txt").write_bytes(b"my_videos/v_Biking_g01_c01 120 3\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    rc, _, err = finish(train_cli(["demo", "trian.txt", "val.txt", "--device", "cpu"], tmp_path))
    assert rc == 2
    one_line_error(err, "train_list not found: trian.txt")
    assert {n: (tmp_path / n).read_bytes() for n in before} == before  # as they were
    assert {p.name for p in tmp_path.iterdir()} - set(before) <= {"output"}  # its own folder


# ---- --evaluate: its files beside the checkpoint it read -----------------------------------------
def test_evaluate_writes_its_files_beside_the_checkpoint(lists, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # where a run folder named from the flags would go (./output)
    (tmp_path / "runs" / "my_run").mkdir(parents=True)
    ckpt = tiny_checkpoint(tmp_path / "runs" / "my_run" / "model_best.pth")
    run_main(["ucf101", *lists, "--device", "cpu", "-j", "0", "--evaluate", "--resume", ckpt])
    beside = sorted(p.name for p in (tmp_path / "runs" / "my_run").iterdir())
    assert [n for n in beside if n.startswith("per_class_1x1_ours_")], beside
    assert [n for n in beside if n.startswith("confusion_1x1_ours_")], beside
    assert not (tmp_path / "output").exists()
    assert "runs/my_run/per_class_1x1_ours_" in capsys.readouterr().out
    # --output_root / --run_name given: the folder they name, as in training
    run_main(
        ["ucf101", *lists, "--device", "cpu", "-j", "0", "--evaluate", "--resume", ckpt]
        + ["--output_root", str(tmp_path / "elsewhere"), "--run_name", "eval"]
    )
    assert list((tmp_path / "elsewhere" / "eval").glob("per_class_1x1_ours_*.csv"))


# ---- a GPU command where no GPU is visible -------------------------------------------------------
@pytest.mark.slow
@no_gpu
def test_the_original_command_with_hidden_gpus_stops_before_any_work(tmp_path):
    cases = [
        (ORIGINAL, "2,3", "CUDA_VISIBLE_DEVICES=2,3 asks for a GPU"),
        (ORIGINAL + ["--decode_device", "cuda"], "", "--decode_device cuda asks for a GPU"),
    ]
    procs = [train_cli(argv, tmp_path, CUDA_VISIBLE_DEVICES=visible) for argv, visible, _ in cases]
    on_purpose = tmp_path / "cpu"
    on_purpose.mkdir()
    procs.append(train_cli(ORIGINAL + ["--device", "cpu"], on_purpose, CUDA_VISIBLE_DEVICES="2,3"))
    results = [finish(p) for p in procs]
    for (_, _, needle), (rc, _, err) in zip(cases, results):
        assert rc == 2
        one_line_error(err, needle, "--device cpu")
    assert os.listdir(tmp_path) == ["cpu"]  # stopped before any work: not even a run folder
    rc, _, err = results[-1]
    one_line_error(err, "train_list not found: train.txt")  # on the CPU on purpose: it goes on


@no_gpu
@pytest.mark.parametrize(
    "given, env, needle",
    [
        (["--ddp"], {}, "--ddp asks for a GPU"),
        (["--amp", "bf16"], {}, "--amp bf16 asks for a GPU"),
        (["--device", "cuda"], {}, "--device cuda asks for a GPU"),
        (["--device", "cuda:1"], {"CUDA_VISIBLE_DEVICES": "0,1"}, "CUDA_VISIBLE_DEVICES=0,1"),
        ([], {"CUDA_VISIBLE_DEVICES": "GPU-5a9c1f2e"}, "CUDA_VISIBLE_DEVICES=GPU-5a9c1f2e"),
    ],
)
def test_a_request_for_gpus_without_one_is_refused(given, env, needle, monkeypatch, capsys):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as e:
        flags.check_args(train.parse_args(["ucf101", "a.txt", "b.txt", *given]))
    one_line_error(capsys, needle, "--device cpu", exc=e)


@no_gpu
@pytest.mark.parametrize("visible", [None, "", "-1", "NoDevFiles"])
def test_no_request_for_gpus_runs_on_the_cpu(visible, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    args = train.parse_args(["ucf101", "a.txt", "b.txt"])
    flags.check_args(args)
    assert args.device == "cpu"
    args = train.parse_args(
        ["ucf101", "a.txt", "b.txt", "--device", "cpu", "--amp", "bf16", "--ddp"]
    )
    flags.check_args(args)  # CPU bf16 and gloo DDP, asked for by name
    assert args.device == "cpu"


# ---- TSM: segments -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["TSN", "2D"])
def test_shift_with_one_segment_is_refused(mode, capsys):
    with pytest.raises(SystemExit) as e:
        flags.check_args(
            train.parse_args(
                ["ucf101", "a", "b", "--mode", mode, "--arch", "resnet18", "--shift", "8"]
            )
        )
    one_line_error(capsys, "--shift 8 with --num_segments 1", "--num_segments N", exc=e)


def test_a_tsm_checkpoint_is_evaluated_on_its_own_segment_count(lists, tmp_path, capsys):
    tsm = dict(arch="resnet18", mode="TSN", num_segments=3, shift=8, t_length=1)
    ckpt = tiny_checkpoint(tmp_path / "tsm.pth", **tsm)
    tsn = tiny_checkpoint(tmp_path / "tsn.pth", **dict(tsm, shift=0))
    base = ["ucf101", *lists, "--device", "cpu", "-j", "0", "--evaluate", "--resume"]
    with pytest.raises(SystemExit) as e:
        run_main([*base, ckpt, "--num_segments", "4"])
    one_line_error(
        capsys, "a TSM model (--shift 8) trained on 3 segments", "--num_segments 4", exc=e
    )
    run_main([*base, ckpt, "--num_segments", "3"])
    run_main([*base, tsn, "--num_segments", "4"])  # TSN averages any number of snippets


# ---- flags that would do nothing -----------------------------------------------------------------
# V-JEPA pretraining's own flags act with --objective vjepa alone
VJEPA_PRETRAIN = [
    "--pretrain",
    "--arch",
    "vjepa2_vitt16",
    "--opt",
    "adamw",
    "--lr_policy",
    "cosine",
]
VJEPA_FLAGS = [
    ("--pred-depth", "2"),
    ("--pred-width", "96"),
    ("--pred-heads", "3"),
    ("--loss-exp", "2"),
    ("--ema-momentum", "0.99 0.999"),
    ("--wd-end", "0.1"),
    ("--schedule-scale", "1.0"),
]
NOTHING = [  # (flag refused, the flags that make it act)
    (["--lr-min", "1e-5"], ["--lr_policy", "cosine"]),
    (["--lr-warmup-start", "1e-6"], ["--warmup", "1"]),
    (["--momentum", "0.5", "--opt", "adamw"], ["--opt", "sgd"]),
    (["--ra-magnitude", "10"], ["--auto-augment", "ra"]),
    (["--ra-num-ops", "3"], ["--auto-augment", "ra"]),
    (["--mix-prob", "0.5"], ["--mixup-alpha", "0.8"]),
    (["--mix-switch-prob", "0.3", "--mixup-alpha", "0.8"], ["--cutmix-alpha", "1"]),
    (["--cutmix-alpha", "1", "--mix-prob", "0"], ["--mix-prob", "0.5"]),
    (
        ["--mixup-alpha", "1", "--cutmix-alpha", "1", "--mix-switch-prob", "1"],
        ["--mix-switch-prob", "0.9"],
    ),
    (["--model-ema-decay", "0.99"], ["--model-ema"]),
    (["--model-ema-steps", "2"], ["--model-ema"]),
    (["--use-ema"], ["--model-ema"]),
    (
        ["--train_sampling", "videomae-ssv2", "--arch", "resnet18", "--mode", "TSN"]
        + ["--num_segments", "3"],
        ["--num_segments", "1"],
    ),
    (["--mask-ratio", "0.5"], ["--pretrain"]),  # the pretraining flags on a fine-tuning run
    (["--decoder-depth", "2"], ["--pretrain"]),
    (["--raw-target"], ["--pretrain"]),
    (["--vis-videos", "1"], ["--pretrain"]),
    (["--probe-lrs", "0.01"], ["--probe", "linear", "--arch", "vit_t16", "--opt", "adamw"]),
    (["--probe-wds", "0.1"], ["--probe", "linear", "--arch", "vit_t16", "--opt", "adamw"]),
    (["--objective", "vjepa", *VJEPA_PRETRAIN[1:]], ["--pretrain"]),
    *(
        ([flag, *value.split(), *VJEPA_PRETRAIN], ["--objective", "vjepa"])
        for flag, value in VJEPA_FLAGS
    ),
]


@pytest.mark.parametrize("given, needs", NOTHING)
def test_a_flag_that_would_do_nothing_is_refused(given, needs, capsys):
    argv = ["ucf101", "a.txt", "b.txt", "--device", "cpu"]
    with pytest.raises(SystemExit) as e:
        flags.check_args(train.parse_args([*argv, *given]))
    one_line_error(capsys, f"{given[0]}", "does nothing without", exc=e)
    flags.check_args(train.parse_args([*argv, *given, *needs]))  # with what it needs: accepted
    if given[0] == "--lr-min":  # either cosine
        flags.check_args(train.parse_args([*argv, *given, "--lr_policy", "cosine_after_warmup"]))


# rules whose case needs an arch no entry has today: tested where the test makes one
# tests/test_flags.py::test_dropout_on_an_arch_without_one_is_refused;
# tests/test_codec.py::test_jpeg_draft_with_nvjpeg_is_refused (--decode_device cuda needs a GPU)
ELSEWHERE = {"--dro", "--jpeg-draft"}


def test_every_rule_of_the_table_is_tested():
    """flags.ACTS_WITH's rules and NOTHING's cases, one for one (docs/forking.md, "A flag", names
    this table): a new rule needs its case here, a flag refused and what makes it act."""
    rules = {flag for flag, _, _ in flags.ACTS_WITH}
    cases = {given[0] for given, _ in NOTHING} | ELSEWHERE
    untested, stale = sorted(rules - cases), sorted(cases - rules)
    assert not untested, (
        f"flags.ACTS_WITH rules without a case in tests/test_outside.py NOTHING: {untested}; add "
        "([the flag refused, ...], [what makes it act, ...]) for each"
    )
    assert not stale, f"NOTHING cases of flags no rule of flags.ACTS_WITH names: {stale}"


@pytest.mark.slow
def test_flags_at_their_defaults_and_a_runs_own_args_file_pass(lists, tmp_path):
    # args.txt spells out every flag, defaults included: a cosine AdamW run resumes from it
    argv = ["ucf101", *lists, *TINY, "--epochs", "1", "--output_root", str(tmp_path)]
    argv += ["--opt", "adamw", "--lr_policy", "cosine", "-b", "8"]
    run_main(argv)
    (folder,) = tmp_path.iterdir()
    run_main([f"@{folder / 'args.txt'}", "--epochs", "2", "--resume", "auto"])
    assert "--momentum 0.9" in (folder / "args.txt").read_text()


def test_bounds_are_said_as_they_are(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["ucf101", "a", "b", "--ra-magnitude", "31"])
    one_line_error(capsys, "--ra-magnitude: must be an integer in [0, 30], got '31'")
    with pytest.raises(SystemExit):
        train.parse_args(["ucf101", "a", "b", "--dro", "1"])
    one_line_error(capsys, "--dropout: must be a number in [0, 1), got '1'")


# ---- a zoo's checkpoint given to --evaluate ------------------------------------------------------
@pytest.mark.parametrize(
    "layout, ckpt",
    [
        ("mmaction2", {"state_dict": {"backbone.conv1.conv.weight": torch.zeros(1)}, "meta": {}}),
        ("pyslowfast", {"model_state": {"s1.pathway0_stem.conv.weight": torch.zeros(1)}}),
        ("pytorchvideo", {"model_state": {"blocks.0.conv.weight": torch.zeros(1)}}),
    ],
)
def test_evaluate_of_a_zoo_checkpoint_says_to_use_pretrained(layout, ckpt, tmp_path, capsys):
    path = tmp_path / "zoo.pth"
    torch.save(ckpt, path)
    with pytest.raises(SystemExit) as e:
        train.parse_args(["ucf101", "a", "b", "--evaluate", "--resume", str(path)])
    one_line_error(capsys, f"is a {layout} checkpoint", f"--pretrained {path}", exc=e)


# ---- features under DDP with a bad video ---------------------------------------------------------
@pytest.mark.slow
def test_ddp_features_finish_every_rank_and_report_a_bad_video_once(tmp_path):
    import prepare

    _, val = prepare.make_synth(str(tmp_path), classes=2, videos=3, frames=9, size=(64, 48))
    bad = videos.make_all(tmp_path / "videos", ["truncated.mp4"])["truncated.mp4"]
    ckpt = tiny_checkpoint(tmp_path / "ck.pth")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd += [str(REPO / "features.py"), val, str(bad), "--resume", ckpt, "--out", str(out)]
    cmd += ["--window", "4", "--stride", "4", "--device", "cpu", "-j", "0", "--ddp"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=240)
    # non-zero, as one process and srun exit: after every rank's videos and the summary line
    assert r.returncode != 0, r.stderr[-3000:]
    assert r.stdout.count("of 4 videos have features") == 1, r.stdout
    # torchrun's banner names each rank with its exit code: 2, or SIGTERM where torchrun ended a
    # rank already past its videos and the summary (it stops the others at the first non-zero exit)
    codes = dict(
        re.findall(r"^\s+rank\s+: (\d+) \(local_rank.*\n\s+exitcode\s+: (-?\d+)", r.stderr, re.M)
    )
    assert sorted(codes) == ["0", "1"] and set(codes.values()) <= {"2", "-15"}, r.stderr[-3000:]
    assert "2" in codes.values(), r.stderr[-3000:]
    assert sorted(p.name for p in out.glob("video_????.npy")) == [
        f"video_{k:04d}.npy" for k in range(3)
    ]
    (line,) = (out / "failed.txt").read_text().splitlines()
    assert str(bad) in line and "1 failed (failed.txt)" in r.stdout
    (said,) = [k for k in r.stderr.splitlines() if str(bad) in k]  # once, by the rank that read it
    assert said.endswith(f"train.py features: error: {line}")
