"""MViTv2-B (mvit_net.py: torchvision's MViT given PySlowFast's blocks) against PySlowFast's MViT.

The reference is the vendored PySlowFast (tests/reference/pyslowfast, Apache-2.0, see its README)
built from get_cfg() + configs/Kinetics/MVITv2_B_32x3.yaml with only the clip (NUM_FRAMES, the crop)
and NUM_CLASSES shrunk. The logits are compared on that network made narrower (MVIT.EMBED_DIM 16,
and mvit_net's spec given the same width): all 24 blocks, their stage boundaries, heads, strides and
kernels are the zoo's, the widths a sixth (51M weights in float64 take half a minute to build and
run). Float64, eval mode, random weights (float32 values, as the zoo's files hold) and random
LayerNorms. The block derivation is also checked at the yaml's own width.
"""

import contextlib
import functools
import re
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

import numpy as np
import pytest
import torch

import features
import model as models
import mvit_net
import slowfast_net
import zoo
from conftest import REPO, one_line_error, run_cli, run_main
from test_slowfast import REF, get_cfg, refusal, save, video_model_builder, zeros_of

YAML = "MVITv2_B_32x3.yaml"
FRAMES, CROP = 4, 64  # 2 x 16 x 16 tokens; K / V pooled to 2 x 2 x 2 in the first stage
# MVIT.EMBED_DIM of the parity tests (the yaml's 96): widths 16 to 128, heads 1 to 8 as the yaml's
WIDTH = 16
NARROW = mvit_net.MVITS["mvitv2_b"]._replace(embed_dim=WIDTH)


def narrow():
    """mvitv2_b built at WIDTH through the usual paths (zoo.build_model, load_pretrained)."""
    return mock.patch.dict(mvit_net.MVITS, {"mvitv2_b": NARROW})


def yaml_cfg(frames, crop, classes, embed_dim=None):
    """PySlowFast's config: its defaults, the zoo's yaml, then the test's clip and classes (its MViT
    asserts TEST_CROP_SIZE == TRAIN_CROP_SIZE) and, given, another MVIT.EMBED_DIM."""
    cfg = get_cfg()
    cfg.merge_from_file(str(REF / "configs" / "Kinetics" / YAML))
    cfg.NUM_GPUS, cfg.MODEL.NUM_CLASSES = 0, classes
    cfg.DATA.NUM_FRAMES, cfg.DATA.TRAIN_CROP_SIZE, cfg.DATA.TEST_CROP_SIZE = frames, crop, crop
    cfg.MVIT.EMBED_DIM = embed_dim or cfg.MVIT.EMBED_DIM
    return cfg


def fast_trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """torch's trunc_normal_ (inverse-CDF sampling) takes seconds for millions of weights; with
    std 0.02 and the cut at +-2 (absolute) a clamped normal is the same distribution."""
    with torch.no_grad():
        return t.normal_(mean, std, generator=generator).clamp_(a, b)


@contextlib.contextmanager
def float64_init():
    """Modules built in float64 (no copy of the weights afterwards), with fast_trunc_normal_."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with mock.patch("torch.nn.init.trunc_normal_", fast_trunc_normal_):
            yield
    finally:
        torch.set_default_dtype(default)


@functools.cache  # shared by the tests of this module, which only read it
def yaml_reference():
    """PySlowFast's MViT at the yaml's width, float32 (its shapes and blocks are read, not run)."""
    cfg = yaml_cfg(FRAMES, CROP, 5)
    with mock.patch("torch.nn.init.trunc_normal_", fast_trunc_normal_):
        return cfg, video_model_builder.MViT(cfg).eval()


@functools.cache  # shared by the tests of this module, which only read it
def reference():
    """PySlowFast's MViT at WIDTH, float64, random weights and norms: the logits' reference."""
    cfg = yaml_cfg(FRAMES, CROP, 5, embed_dim=WIDTH)
    torch.manual_seed(0)  # PySlowFast's init draws from the global generator
    with float64_init():
        ref = video_model_builder.MViT(cfg).eval()
    g = torch.Generator().manual_seed(0)
    for name, t in ref.state_dict().items():
        # LayerNorm scales in [0.8, 1.2] and every bias random (PySlowFast inits them 1 and 0.02)
        if t.dim() == 1:
            r = torch.rand(t.shape, generator=g, dtype=t.dtype) - 0.5
            t.copy_(1 + 0.4 * r if re.search(r"norm\w*\.weight$", name) else 0.4 * r)
        t.copy_(t.float().double())  # float32 values, as the zoo's .pyth files hold
    ref.head.act = None  # eval mode ends in a softmax (MODEL.HEAD_ACT): compare the logits
    return cfg, ref


def clip():
    g = torch.Generator().manual_seed(1)
    return torch.randn(1, 3, FRAMES, CROP, CROP, dtype=torch.float64, generator=g)


def test_pyslowfast_pyth_gives_the_same_logits_float64_and_the_head_is_replaced(tmp_path, capsys):
    """A PySlowFast .pyth (model_state, PySlowFast's names, float32) through --pretrained: every
    tensor renamed and copied, the one-line report, logits equal to PySlowFast's MViT in float64."""
    cfg, ref = reference()
    state = {k: v.float() for k, v in ref.state_dict().items()}
    path = save(tmp_path, {"model_state": state, "cfg": "..."}, "MViTv2_B.pyth")
    # the file's float32 values copied into a float64 model
    with float64_init(), narrow():
        net = zoo.build_model("mvitv2_b", 5, t_length=FRAMES, crop_size=CROP, pretrained=path)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    n = len(ref.state_dict())
    assert line == f"pretrained {path} (pyslowfast, 3D): inflated 0, copied {n}, skipped 0"
    assert net.pretrained_info["mean"] == (0.45, 0.45, 0.45)
    x = clip()
    with torch.no_grad():
        want = ref([x])
        got = net.eval()(x)
    assert got.shape == want.shape == (1, 5)
    assert ((got - want).norm() / want.norm()).item() < 1e-6
    # features.py's features: the classifier's input (the class token after the final norm)
    feats, logits = features.Extractor(net)(x)
    assert feats.shape == (1, WIDTH * 8) and torch.equal(logits, got)
    assert torch.allclose(net.head[1](feats), got, rtol=0, atol=1e-12)
    for ours, theirs in (
        ("blocks.23.attn.rel_pos_t", "blocks.23.attn.rel_pos_t"),
        ("blocks.21.attn.pool_q.norm_act.0.weight", "blocks.21.attn.norm_q.weight"),
        ("pos_encoding.class_token", "cls_token"),
    ):
        assert torch.equal(net.state_dict()[ours].flatten(), ref.state_dict()[theirs].flatten())
    # Fine-tuning: another num_classes re-initialises the classifier only, and says so.
    with torch.device("meta"), narrow():
        net = models.build_network("mvitv2_b", 7, t_length=FRAMES, crop_size=CROP)
        zoo.load_pretrained(net, path)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"copied {n - 2}, skipped 2 (head.1.weight, head.1.bias: shape mismatch" in line
    assert "classifier re-initialised" in line


def test_the_blocks_are_those_pyslowfast_derives_from_the_yaml():
    """mvit_net's spec against the yaml's values, and block_settings against what PySlowFast's
    MViT.__init__ built from them (heads, widths, Q and K / V strides and kernels per block), at the
    yaml's width and at the parity tests' WIDTH."""
    cfg, ref = yaml_reference()
    m, spec = cfg.MVIT, mvit_net.MVITS["mvitv2_b"]
    assert (spec.depth, spec.embed_dim, spec.num_heads) == (m.DEPTH, m.EMBED_DIM, m.NUM_HEADS)
    assert [[i, 2.0] for i in spec.stage_starts] == m.DIM_MUL == m.HEAD_MUL
    assert [s[1:] for s in m.POOL_Q_STRIDE] == [
        list(spec.q_stride if i in spec.stage_starts else (1, 1, 1)) for i in range(spec.depth)
    ]
    assert (list(spec.kv_stride), list(spec.kernel)) == (
        m.POOL_KV_STRIDE_ADAPTIVE,
        m.POOL_KVQ_KERNEL,
    )
    assert spec.drop_path == m.DROPPATH_RATE
    patch = (list(spec.patch_kernel), list(spec.patch_stride), list(spec.patch_padding))
    assert patch == (m.PATCH_KERNEL, m.PATCH_STRIDE, m.PATCH_PADDING)
    assert (m.CLS_EMBED_ON, m.USE_ABS_POS, m.RESIDUAL_POOLING, m.DIM_MUL_IN_ATT) == (
        True,
        False,
        True,
        True,
    )
    assert (m.REL_POS_SPATIAL, m.REL_POS_TEMPORAL, m.MODE, m.POOL_FIRST) == (
        True,
        True,
        "conv",
        False,
    )
    for net, ours in ((ref, spec), (reference()[1], NARROW)):
        for i, (b, blk) in enumerate(zip(mvit_net.block_settings(ours), net.blocks, strict=True)):
            a = blk.attn
            assert (b.num_heads, b.input_channels, b.output_channels) == (
                a.num_heads,
                blk.dim,
                blk.dim_out,
            ), i
            assert list(b.stride_q) == list(a.pool_q.stride), i
            assert list(b.kernel_q) == list(a.pool_q.kernel_size), i
            assert list(b.stride_kv) == list(a.pool_k.stride), i
            assert list(b.kernel_kv) == list(a.pool_k.kernel_size), i
    widths = [b.output_channels for b in mvit_net.block_settings(spec)]
    assert (widths[1], widths[2], widths[5], widths[21], widths[-1]) == (96, 192, 384, 768, 768)
    heads = [b.num_heads for b in mvit_net.block_settings(NARROW)]
    assert heads == [b.num_heads for b in mvit_net.block_settings(spec)]


def test_sizes_are_the_published_ones():
    """bench.py's count per 32x224 view: 51.2M parameters, 225 GFLOPs (fvcore's count: MACs)
    (PySlowFast projects/mvitv2/README.md)."""
    import bench

    params, gmacs = bench.count("mvitv2_b", 400, 32, 224)
    assert params / 1e6 == pytest.approx(51.2, abs=0.05) and gmacs == pytest.approx(225, rel=0.01)


def test_wrong_files_clips_and_modes_are_refused_in_one_line(tmp_path, capsys):
    _, ref = yaml_reference()
    mvit = {
        "model_state": {k: torch.zeros(()).expand(v.shape) for k, v in ref.state_dict().items()}
    }
    v1 = {"model_state": {k: v for k, v in mvit["model_state"].items() if "rel_pos" not in k}}
    tiny = dict(t_length=FRAMES, crop_size=CROP)
    with torch.device("meta"):
        net = models.build_network("mvitv2_b", 5, **tiny)
    for arch, obj, needle in (
        ("mvitv2_b", {"model_state": zeros_of("slowfast_r50_8x8")}, "use --arch slowfast_r50"),
        ("mvitv2_b", {"model_state": zeros_of("x3d_xs")}, "an X3D checkpoint"),
        ("slowfast_r50_8x8", mvit, "an MViTv2 of 24 blocks, width 96 to 768"),
        ("x3d_m", mvit, "not x3d_m's network: use --arch mvitv2_b"),
        ("resnet50_3d", mvit, "use --arch mvitv2_b"),
        ("mvit_v2_s", mvit, "use --arch mvitv2_b"),
        ("mvitv2_b", v1, "MViTv1 (absolute positions) of 24 blocks"),
    ):
        if arch == "mvitv2_b":
            with pytest.raises(ValueError) as e:
                zoo.load_pretrained(net, save(tmp_path, obj, "w.pyth"))
            message = str(e.value)
            assert "\n" not in message
        else:
            message = refusal(tmp_path, arch, obj)
        assert needle in message, (arch, message)
    # a VideoMAE ViT (vit_zoo.py's loader), whose patch_embed looks alike
    with torch.device("meta"):
        vit = models.build_network("vit_t16", 5, t_length=16)
    with pytest.raises(ValueError, match="not vit_t16's network: use --arch mvitv2_b"):
        zoo.load_pretrained(vit, save(tmp_path, mvit, "w.pyth"))
    for flags, needles in (
        (["--mode", "TSN"], ("--arch mvitv2_b runs on 3D clips only", "not --mode TSN")),
        (["--t_length", "7"], ("--t_length 7", "give a multiple of 2")),
        (["--crop_size", "200"], ("--crop_size 200", "give a multiple of 32")),
    ):
        with pytest.raises(SystemExit) as e:
            run_main(["ucf101", "no_train.txt", "no_val.txt", "--arch", "mvitv2_b", *flags])
        one_line_error(capsys, *needles, exc=e)
    with pytest.raises(ValueError, match="--pretrained imagenet is for the resnet.*mvitv2_b takes"):
        zoo.build_model("mvitv2_b", 5, pretrained="imagenet")
    with pytest.raises(ValueError, match="built for 4x64x64"):
        net(torch.zeros(1, 3, 4, 32, 32, device="meta"))


def test_recipes_are_the_yaml():
    """Every value of recipes/kinetics_mvitv2_b.txt is MVITv2_B_32x3.yaml's (with PySlowFast's
    defaults), read by PySlowFast's config code; the test views its comment gives are the yaml's;
    the UCF101 recipe keeps the weights' clips and loads them."""
    import train

    cfg = get_cfg()
    cfg.merge_from_file(str(REF / "configs" / "Kinetics" / YAML))
    d, s, mix, aug = cfg.DATA, cfg.SOLVER, cfg.MIXUP, cfg.AUG
    text = (REPO / "recipes" / "kinetics_mvitv2_b.txt").read_text()
    args = train.parse_args(["kinetics400", "t.txt", "v.txt", "@recipes/kinetics_mvitv2_b.txt"])
    assert (args.arch, args.t_length, args.t_stride) == ("mvitv2_b", d.NUM_FRAMES, d.SAMPLING_RATE)
    assert (args.new_size, args.crop_size) == (d.TRAIN_JITTER_SCALES[0], d.TRAIN_CROP_SIZE)
    assert tuple(args.mean) == tuple(d.MEAN) and tuple(args.std) == tuple(d.STD)
    assert (args.dropout, args.drop_path) == (cfg.MODEL.DROPOUT_RATE, cfg.MVIT.DROPPATH_RATE)
    assert (args.opt, args.lr, args.weight_decay, args.epochs) == (
        s.OPTIMIZING_METHOD,
        s.BASE_LR,
        s.WEIGHT_DECAY,
        s.MAX_EPOCH,
    )
    assert (args.lr_policy, args.lr_min, args.clip_grad) == (
        s.LR_POLICY,
        s.COSINE_END_LR,
        s.CLIP_GRAD_L2NORM,
    )
    assert (args.warmup, args.lr_warmup_start) == (s.WARMUP_EPOCHS, s.WARMUP_START_LR)
    assert s.ZERO_WD_1D_PARAM and args.norm_weight_decay == 0
    assert (args.mixup_alpha, args.cutmix_alpha, args.mix_prob, args.mix_switch_prob) == (
        mix.ALPHA,
        mix.CUTMIX_ALPHA,
        mix.PROB,
        mix.SWITCH_PROB,
    )
    assert args.label_smoothing == mix.LABEL_SMOOTH_VALUE
    assert (args.random_erase, args.color_jitter, args.ra_reps) == (
        aug.RE_PROB,
        aug.COLOR_JITTER,
        aug.NUM_SAMPLE,
    )
    assert f"rand-m{args.ra_magnitude}-n{args.ra_num_ops}-" in aug.AA_TYPE
    assert args.batch_size * cfg.NUM_GPUS == cfg.TRAIN.BATCH_SIZE
    assert (args.eval_freq, args.workers) == (cfg.TRAIN.EVAL_PERIOD, cfg.DATA_LOADER.NUM_WORKERS)
    views = re.search(r"--test_clips (\d+) --test_crops (\d+)", text)
    assert (int(views[1]), int(views[2])) == (
        cfg.TEST.NUM_ENSEMBLE_VIEWS,
        cfg.TEST.NUM_SPATIAL_CROPS,
    )
    assert f"--new_size {d.TEST_CROP_SIZE} --crop_size {d.TEST_CROP_SIZE}" in text
    offset = {True: "pyslowfast-offset", False: "pyslowfast"}[d.USE_OFFSET_SAMPLING]
    assert re.search(r"--test_sampling (\S+)", text)[1] == offset
    ucf = train.parse_args(["ucf101", "t.txt", "v.txt", "@recipes/ucf101_mvitv2_b.txt"])
    assert (ucf.arch, ucf.pretrained, ucf.t_length, ucf.t_stride, ucf.crop_size) == (
        "mvitv2_b",
        "kinetics400",
        d.NUM_FRAMES,
        d.SAMPLING_RATE,
        d.TRAIN_CROP_SIZE,
    )
    assert zoo.KINETICS400_URLS["mvitv2_b"].endswith("/MViTv2_B_32x3_k400_f304025456.pyth")


@pytest.mark.slow
def test_wrong_files_of_the_family_are_refused_before_the_lists_are_read(tmp_path, capsys):
    """train.main's check_weights: a wrong --pretrained file of the PySlowFast family is refused in
    one line (exit 2, no traceback) before the train list -- which does not exist here -- is read.
    `python train.py` in subprocesses with a timeout (side by side) for a SlowFast file given to
    X3D, an X3D of another width and an MViT given to SlowFast; in this process the reverse family
    and a Caffe2 .pkl of another arch, and the right file, which gets as far as the list."""
    narrow = slowfast_net.X3DNet(slowfast_net.X3DSpec(2.2, width_factor=1.0), 5)
    i3d = {"blobs": {"conv1_w": np.zeros((64, 3, 5, 7, 7)), "pred_w": np.zeros((5, 2048))}}
    files = {
        "slowfast": save(tmp_path, {"model_state": zeros_of("slowfast_tiny")}, "sf.pyth"),
        "x3d": save(tmp_path, {"model_state": zeros_of("x3d_xs")}, "x3d.pyth"),
        "narrow": save(tmp_path, {"model_state": zeros_of("x3d_xs", narrow)}, "x3d_w1.pyth"),
        "mvit": save(tmp_path, {"model_state": zeros_of("mvit", yaml_reference()[1])}, "m.pyth"),
        "caffe2": save(tmp_path, i3d, "i3d.pkl"),
    }
    base = ["ucf101", str(tmp_path / "no_train.txt"), str(tmp_path / "no_val.txt")]
    base += ["--t_length", "8", "--crop_size", "32", "--output_root", str(tmp_path / "o")]
    cases = [
        ("x3d_xs", "slowfast", "a SlowFast checkpoint (pyslowfast layout), not x3d_xs's network"),
        ("x3d_xs", "narrow", "stem width 12; x3d_xs has"),
        ("slowfast_tiny", "mvit", "an MViTv2 of 24 blocks, width 96 to 768"),
    ]
    argv = [[*base, "--arch", arch, "--pretrained", files[f]] for arch, f, _ in cases]
    with ThreadPoolExecutor(len(argv)) as pool:
        results = list(pool.map(lambda a: run_cli(a, timeout=120), argv))
    for (arch, f, needle), r in zip(cases, results, strict=True):
        assert r.returncode == 2, (arch, f, r.stderr)
        assert "no_train.txt" not in one_line_error(r.stderr, needle)
    for arch, f, needle in (
        ("slowfast_tiny", "x3d", "an X3D checkpoint (pyslowfast layout)"),
        ("slowfast_tiny", "caffe2", "not a SlowFast / X3D checkpoint (pyslowfast-caffe2"),
        ("x3d_xs", "x3d", "no_train.txt"),  # the right file: the list's error
    ):
        with pytest.raises(SystemExit) as e:
            run_main([*base, "--arch", arch, "--pretrained", files[f]])
        err = one_line_error(capsys, needle, exc=e)
        assert ("no_train.txt" in err) == (needle == "no_train.txt"), err
