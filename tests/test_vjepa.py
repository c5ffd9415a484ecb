"""V-JEPA 2's encoders and attentive probe (vjepa.py) against the official code.

Reference: facebookresearch/vjepa2 (MIT), vendored unchanged under tests/reference/vjepa2 (its
src/models/vision_transformer.py, utils/modules.py, attentive_pooler.py; they need timm and einops).
Every comparison is float64 with random weights (every bias and norm non-zero) unless a test says
otherwise; the networks are 1-2 blocks deep with the published widths and heads.
"""

import functools
import importlib
import math
import shutil
import sys

import pytest
import torch
import torch.nn as nn

import vjepa
import zoo
from conftest import REPO

pytest.importorskip("timm")  # the official modules.py imports it
pytest.importorskip("einops")  # the official patch_embed.py imports it
sys.path.insert(0, str(REPO / "tests" / "reference" / "vjepa2"))
ovit = importlib.import_module("src.models.vision_transformer")
opool = importlib.import_module("src.models.attentive_pooler")
# V-JEPA 2.1 (app/vjepa_2_1): its patch_embed.py is not in the vendored copy (see its README); 2.1's
# vision_transformer.py imports PatchEmbed3D from there, and V-JEPA 2's stands in for it
sys.modules.setdefault(
    "app.vjepa_2_1.models.utils.patch_embed",
    importlib.import_module("src.models.utils.patch_embed"),
)
ovit21 = importlib.import_module("app.vjepa_2_1.models.vision_transformer")
omod21 = importlib.import_module("app.vjepa_2_1.models.utils.modules")

LN = functools.partial(nn.LayerNorm, eps=1e-6)  # the official constructors' norm_layer
REL = 1e-6


def randomise(m, seed=0):
    """Every parameter random: nothing stays 0 or 1."""
    g = torch.Generator().manual_seed(seed)
    for p in m.parameters():
        p.data.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.1)
    return m.eval()


def official_encoder(arch, depth, frames=16, size=256):
    """vision_transformer.py's constructor of `arch` (use_rope=True), `depth` blocks."""
    s = vjepa.VJEPA_SPECS[arch]
    return ovit.VisionTransformer(
        img_size=size,
        num_frames=frames,
        patch_size=16,
        tubelet_size=2,
        embed_dim=s.width,
        depth=depth,
        num_heads=s.heads,
        mlp_ratio=s.mlp_ratio,
        qkv_bias=True,
        norm_layer=LN,
        use_rope=True,
        uniform_power=True,
    )


def pair(arch, depth):
    """(ours, official) with the official's random weights copied into ours, float64, eval."""
    theirs = randomise(official_encoder(arch, depth).double())
    ours = vjepa.build(arch, 3, depth=depth).double().eval()
    missing = ours.load_state_dict(theirs.state_dict(), strict=False)
    assert not missing.unexpected_keys
    assert all(k.startswith("head.") for k in missing.missing_keys)
    return ours, theirs


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize(
    "arch, depth, shape",
    [
        ("vjepa2_vitl16", 2, (2, 3, 4, 32, 48)),  # ViT-L: 1024 wide, 16 heads; H != W
        ("vjepa2_vitg16", 1, (1, 3, 4, 48, 32)),  # ViT-g's block: 1408 wide, 22 heads, MLP 48/11
    ],
)
def test_encoder_tokens_equal_the_official_rope_vit(arch, depth, shape):
    ours, theirs = pair(arch, depth)
    x = torch.randn(shape, dtype=torch.float64)
    with torch.no_grad():
        got, want = ours.tokens(x), theirs(x)
    assert (
        got.shape
        == want.shape
        == (shape[0], 2 * (shape[3] // 16) * (shape[4] // 16), ours.spec.width)
    )
    assert rel(got, want) < REL


@pytest.mark.parametrize("frames", [32, 64])
def test_a_16_frame_encoder_run_longer_equals_the_official_at_that_length(frames):
    """RoPE has no table: the official model built for 16 frames reads longer clips by its
    positions."""
    ours, theirs = pair("vjepa2_vitl16", 1)
    x = torch.randn(1, 3, frames, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        assert rel(ours.tokens(x), theirs(x)) < REL


def test_the_rotation_pairs_adjacent_channels_with_the_official_frequencies():
    """Channel c of a 20-channel axis turns at 10000^(-(c mod 10) / 10): the official repeat."""
    x = torch.zeros(1, 1, 1, 20, dtype=torch.float64)
    # the pair (2, 3): channel 2 turns into channel 3 by channel 3's angle... and 2's
    x[..., 2] = 1.0
    y = vjepa.rotate(x, torch.tensor([1]))
    omega = 1.0 / 10000 ** (torch.arange(10, dtype=torch.float64) / 10)
    assert torch.allclose(y[0, 0, 0, 2], torch.cos(omega[2]))
    assert torch.allclose(y[0, 0, 0, 3], torch.sin(omega[3]))


def test_same_seed_same_weights_as_the_official_init():
    """The encoder's and the probe's init (trunc normal, rescaled blocks, module order) are the
    official."""
    torch.manual_seed(0)
    theirs = official_encoder("vjepa2_vitl16", 2)
    torch.manual_seed(0)
    ours = vjepa.VJEPAViT("vjepa2_vitl16", 3, depth=2)
    for k, v in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[k], v), k
    torch.manual_seed(1)
    theirs = opool.AttentiveClassifier(embed_dim=192, num_heads=16, depth=4, num_classes=7)
    torch.manual_seed(1)
    ours = vjepa.AttentiveClassifier(192, 7, heads=16, depth=4)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    for k, v in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[k], v), k


@pytest.mark.parametrize("depth", [1, 4])
def test_attentive_classifier_equals_the_official(depth):
    theirs = randomise(
        opool.AttentiveClassifier(embed_dim=128, num_heads=16, depth=depth, num_classes=5).double()
    )
    ours = vjepa.AttentiveClassifier(128, 5, heads=16, depth=depth).double().eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 24, 128, dtype=torch.float64)
    with torch.no_grad():
        assert rel(ours(x), theirs(x)) < REL


def test_clip_geometry_is_checked_in_one_line():
    m = vjepa.build("vjepa2_vitt16", 2, depth=1)
    with pytest.raises(ValueError, match="multiple of 2 frames"):
        m(torch.zeros(1, 3, 3, 32, 32))
    assert "multiple of 2" in vjepa.geometry_error("vjepa2_vitt16", 5, 224)
    assert "multiple of 16" in vjepa.geometry_error("vjepa2_vitt16", 16, 250)
    assert vjepa.geometry_error("vjepa2_vitt16", 16, 384) is None


# ---- loading: official .pt files, transformers folders, official probes --------------------------


def tiny_official(seed=0, depth=4):
    """An official encoder of vjepa2_vitt16's shape (192 wide, 3 heads), random, float64."""
    return randomise(official_encoder("vjepa2_vitt16", depth).double(), seed)


def save_official(path, prefix="module.backbone.", pos_embed=True, depth=2):
    """A pretraining checkpoint as the official train loop writes it: three encoders, a
    predictor."""
    encs = {
        k: tiny_official(seed, depth)
        for seed, k in enumerate(("encoder", "target_encoder", "ema_encoder"))
    }
    ckpt = {k: {prefix + n: v for n, v in m.state_dict().items()} for k, m in encs.items()}
    if pos_embed:  # src/hub/backbones.py: "state_dict has pos_embed but we use RoPE"
        ckpt["encoder"][prefix + "pos_embed"] = torch.zeros(1, 8, 192)
    ckpt.update(predictor={"module.predictor_embed.weight": torch.zeros(1)}, epoch=10)
    torch.save(ckpt, path)
    return encs


def tiny(depth=2, classes=5):
    return vjepa.build("vjepa2_vitt16", classes, depth=depth).double().eval()


@pytest.mark.parametrize(
    "key, prefix", [(None, "module.backbone."), ("encoder", ""), ("ema_encoder", "module.")]
)
def test_official_pt_loads_the_encoder_the_probe_evals_read(tmp_path, capsys, key, prefix):

    encs = save_official(tmp_path / "vitl.pt", prefix)
    m = tiny()
    zoo.load_pretrained(m, str(tmp_path / "vitl.pt"), vjepa_key=key)
    line = capsys.readouterr().out
    want = encs[key or "target_encoder"]  # the eval configs' checkpoint_key
    x = torch.randn(1, 3, 4, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        assert rel(m.tokens(x), want(x)) < REL
    assert f"official '{key or 'target_encoder'}'" in line and "new 4" not in line
    assert line.count("\n") == 1 and ("dropped 1 (pos_embed)" in line) == (key == "encoder")


def test_official_probe_checkpoint_onto_the_probe(tmp_path, capsys):
    import vjepa_zoo

    theirs = randomise(
        opool.AttentiveClassifier(embed_dim=192, num_heads=16, depth=4, num_classes=7).double()
    )
    sd = {"module." + k: v for k, v in theirs.state_dict().items()}
    torch.save({"classifiers": [sd], "opt": [], "epoch": 20}, tmp_path / "ssv2-vitl-16x2x3.pt")
    m = tiny(classes=7)
    vjepa_zoo.load_probe(m.head, str(tmp_path / "ssv2-vitl-16x2x3.pt"))
    x = torch.randn(2, 16, 192, dtype=torch.float64)
    with torch.no_grad():
        assert rel(m.head(x), theirs(x)) < REL
    assert "loaded" in capsys.readouterr().out
    with pytest.raises(
        ValueError,
        match=r"width 192, 7 classes, 4 blocks does not fit this run's \(width 192, 5 classes",
    ) as e:
        vjepa_zoo.load_probe(tiny(classes=5).head, str(tmp_path / "ssv2-vitl-16x2x3.pt"))
    assert "\n" not in str(e.value)


def hf_pair(tmp_path, classify, pooler_layers=3):
    transformers = pytest.importorskip("transformers")
    config = transformers.VJEPA2Config(
        hidden_size=192,
        num_hidden_layers=2,
        num_attention_heads=3,
        crop_size=32,
        frames_per_clip=4,
        pred_hidden_size=64,
        pred_num_hidden_layers=1,
        pred_num_attention_heads=2,
        num_pooler_layers=pooler_layers,
        num_labels=5,
        attn_implementation="sdpa",
    )
    cls = transformers.VJEPA2ForVideoClassification if classify else transformers.VJEPA2Model
    hf = randomise(cls(config).double())
    hf.save_pretrained(tmp_path / "hf", safe_serialization=True)
    return hf


@pytest.mark.parametrize("classify", [False, True])
def test_transformers_folders_give_their_own_outputs(tmp_path, capsys, classify):

    hf = hf_pair(tmp_path, classify)
    m = tiny()
    zoo.load_pretrained(m, str(tmp_path / "hf"))
    line = capsys.readouterr().out
    x = torch.randn(2, 3, 4, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        if classify:  # their pooler and classifier: our head, computing as theirs (eps, heads)
            assert rel(m(x), hf(pixel_values_videos=x.transpose(1, 2)).logits) < REL
            assert "probe as transformers: 3 heads" in line
        else:
            want = hf(pixel_values_videos=x.transpose(1, 2), skip_predictor=True).last_hidden_state
            assert rel(m.tokens(x), want) < REL
            assert "new " in line and "dropped" in line  # the head is new, the predictor dropped


def test_a_transformers_folders_pooler_depth_is_read(tmp_path, capsys):
    """config.json's num_pooler_layers (1 here, 3 in the published folders): the probe is built
    with that depth and computes as transformers' classifier."""
    hf = hf_pair(tmp_path, classify=True, pooler_layers=1)
    m = tiny()
    zoo.load_pretrained(m, str(tmp_path / "hf"))
    assert "1 pooler layers (num_pooler_layers)" in capsys.readouterr().out
    assert len(m.head.pooler.blocks) == 1
    x = torch.randn(2, 3, 4, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        assert rel(m(x), hf(pixel_values_videos=x.transpose(1, 2)).logits) < REL


def test_wrong_files_are_refused_in_one_line(tmp_path):

    save_official(tmp_path / "vitl.pt")
    cases = [
        (
            vjepa.build("vjepa2_vitt16", 5, depth=3),
            str(tmp_path / "vitl.pt"),
            "vjepa2_vitt16",
            None,
        ),
        (tiny(), str(tmp_path / "vitl.pt"), "no 'teacher'", "teacher"),
    ]
    for m, src, needle, key in cases:
        with pytest.raises(ValueError) as e:
            zoo.load_pretrained(m, src, vjepa_key=key)
        assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


# ---- the multi-clip protocol and probing ---------------------------------------------------------


def test_segments_and_views_equal_clip_aggregation_and_the_official_view_average():
    """2 segments x 2 spatial views: ClipAggregation's per-view token concatenation, the official
    probe on each view and eval.py's softmax average, against ProbedModel on each view's whole clip
    (its segments in time order) and the trainer's view average (softmax, mean over views)."""
    import probe

    agg_mod = importlib.import_module(
        "evals.video_classification_frozen.modelcustom.vit_encoder_multiclip"
    )
    enc = tiny_official(depth=1)
    theirs_enc = agg_mod.ClipAggregation(enc, tubelet_size=2)
    clf = randomise(
        opool.AttentiveClassifier(embed_dim=192, num_heads=16, depth=2, num_classes=5).double()
    )
    ours_enc = tiny(depth=1)
    ours_enc.load_state_dict(enc.state_dict(), strict=False)
    head = vjepa.AttentiveClassifier(192, 5, heads=16, depth=2).double()
    head.load_state_dict(clf.state_dict())
    ours = probe.ProbedModel(ours_enc, [head], snippet=4).eval()
    segs = [
        [torch.randn(2, 3, 4, 32, 32, dtype=torch.float64) for _view in range(2)]
        for _seg in range(2)
    ]
    with torch.no_grad():
        outs = theirs_enc(segs)  # per view: (B, 2 segments x 8 tokens, D)
        want = sum(torch.softmax(clf(o), 1) for o in outs) / len(outs)  # eval.py run_one_epoch
        # (B, 3, 8, H, W)
        views = [torch.cat([segs[s][v] for s in range(2)], dim=2) for v in range(2)]
        for v in range(2):
            assert rel(ours.tokens(views[v]), outs[v]) < REL
        got = torch.stack([torch.softmax(ours(x), 1) for x in views], 1).mean(1)
    assert rel(got, want) < REL


def save_tiny_official(tmp_path):
    save_official(tmp_path / "vitt.pt", depth=4)
    return str(tmp_path / "vitt.pt")


PROBE = [
    *("--arch", "vjepa2_vitt16", "--t_length", "4", "--new_size", "36", "--crop_size", "32"),
    *("-b", "4", "--epochs", "1", "-j", "0", "--device", "cpu", "--opt", "adamw"),
    *("--probe", "attentive", "--probe-blocks", "1", "--seed", "3"),
]


def probe_run(lists, tmp_path, name, *flags):
    from conftest import run_main

    argv = ["ucf101", *lists, *PROBE, "--output_root", str(tmp_path / name), *flags]
    run_main(argv)
    from conftest import run_dir

    return torch.load(run_dir(tmp_path / name, argv) / "checkpoint.pth", weights_only=False)


@pytest.mark.slow
def test_probing_leaves_the_backbone_bit_identical_and_a_grid_equals_single_runs(lists, tmp_path):
    """A grid of 2 lrs in one pass: its probes, their AdamW moments and the backbone equal two
    single-probe runs with the same seed, bit for bit; the backbone equals the loaded file's."""
    src = save_tiny_official(tmp_path)
    enc = torch.load(src, weights_only=False)["target_encoder"]
    enc = {k.replace("module.backbone.", ""): v for k, v in enc.items()}
    wds = ("--probe-wds", "0.05")
    grid = probe_run(
        lists, tmp_path, "grid", "--pretrained", src, "--probe-lrs", "1e-3", "3e-4", *wds
    )
    ones = [
        probe_run(lists, tmp_path, f"one{lr}", "--pretrained", src, "--probe-lrs", lr, *wds)
        for lr in ("1e-3", "3e-4")
    ]
    for k, v in enc.items():  # frozen: the file's weights, as float32
        assert torch.equal(grid["model"]["backbone." + k], v.float()), k
    n = len(ones[0]["optimizer"]["param_groups"][0]["params"])
    for i, one in enumerate(ones):
        for k, v in one["model"].items():
            g = k.replace("probes.0.", f"probes.{i}.")
            assert torch.equal(grid["model"][g], v), k
        st_grid, st_one = grid["optimizer"]["state"], one["optimizer"]["state"]
        for j in range(n):
            for s in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(st_grid[i * n + j][s], st_one[j][s])
    moved = [k for k in grid["model"] if k.startswith("probes.0.")]
    assert any(
        not torch.equal(grid["model"][k], grid["model"][k.replace(".0.", ".1.", 1)]) for k in moved
    )


def test_the_official_schedules():
    """eval.py's WarmupCosineLRSchedule / CosineWDSchedule: stepped before each iteration (step 1
    first)."""
    import probe

    class Opt:
        param_groups = [{"probe_lr": 0.005, "probe_wd": 0.01}]

    class Args:
        epochs, warmup, lr_warmup_start, lr_min, lr_policy = 2, 0.0, 0.0, 0.0, "cosine"

    probe.schedule(Opt, Args, 0, 10, None)  # the first step: _step 1 of T_max 20
    assert Opt.param_groups[0]["lr"] == 0.005 * 0.5 * (1.0 + math.cos(math.pi * 1 / 20))
    assert Opt.param_groups[0]["weight_decay"] == 0.01
    assert probe.warmup_cosine(5, 100, 10, 0.0, 1.0, 0.0) == 0.5  # linear warmup from start


def test_bad_inputs_are_one_line_before_any_work(lists, tmp_path, capsys):
    """V-JEPA file -> VideoMAE arch and the reverse, a probe of another class count, a clip length
    the tubelet does not divide, --probe with flags that would train the backbone, a ConvNet
    probe."""
    import vit

    from conftest import one_line_error, run_main

    src = save_tiny_official(tmp_path)
    videomae = tmp_path / "videomae.pth"
    torch.save({"model": vit.build("vit_t16", 4, t_length=4, crop_size=32).state_dict()}, videomae)
    clf = opool.AttentiveClassifier(embed_dim=192, num_heads=16, depth=4, num_classes=7)
    torch.save({"classifiers": [clf.state_dict()]}, tmp_path / "probe.pt")
    base = ["ucf101", *lists, *PROBE[:-6], "--output_root", str(tmp_path / "o")]
    cases = [
        (["--arch", "vit_t16", "--pretrained", src], "V-JEPA 2 encoder (RoPE), not vit_t16's"),
        (["--arch", "vit_t16", "--pretrained", src], "give --arch vjepa2_vitt16"),
        (["--pretrained", str(videomae)], "not a V-JEPA 2 encoder; give --arch vit_t16"),
        (["--probe-weights", str(tmp_path / "probe.pt"), "--num_classes", "5"], "7 classes"),
        (["--t_length", "5"], "--t_length 5"),
        (["--probe", "attentive", "--layer-decay", "0.75"], "drop --layer-decay"),
        (["--probe", "linear", "--drop-path", "0.1"], "drop --drop-path"),
        (["--probe", "attentive", "--arch", "resnet10_3d"], "--probe reads a ViT's tokens"),
    ]
    for flags, needle in cases:
        with pytest.raises(SystemExit) as e:
            run_main([*base, *flags])
        one_line_error(capsys, needle, exc=e)


@pytest.mark.slow
def test_wrong_weights_are_refused_in_one_line_before_the_lists_are_read(lists, tmp_path, capsys):
    """Lists that do not exist: a V-JEPA file for a VideoMAE arch and the reverse, a 2.0 file for a
    2.1 arch, a probe of another width and one of another class count are each refused first, in one
    line (exit 2, no traceback; the width as `python train.py` in a subprocess with a timeout). With
    the right file the same command fails on the list; with real lists and the right files it trains
    (the check reads the files memory-mapped and builds on the meta device)."""
    import vit

    from conftest import one_line_error, run_cli, run_main

    src = save_tiny_official(tmp_path)
    videomae = tmp_path / "videomae.pth"
    torch.save({"model": vit.build("vit_t16", 4, t_length=4, crop_size=32).state_dict()}, videomae)
    # (name, width, blocks, classes); ucf101 has 101 classes
    for name, width, depth, k in (("128", 128, 4, 7), ("192", 192, 4, 7), ("ok", 192, 1, 101)):
        clf = opool.AttentiveClassifier(embed_dim=width, num_heads=16, depth=depth, num_classes=k)
        torch.save({"classifiers": [clf.state_dict()]}, tmp_path / f"probe{name}.pt")
    missing = [str(tmp_path / "no_train.txt"), str(tmp_path / "no_val.txt")]
    base = ["ucf101", *missing, *PROBE[:-6], "--output_root", str(tmp_path / "o")]
    width = (
        ["--probe-weights", str(tmp_path / "probe128.pt"), "--num_classes", "7"],
        "a probe of width 128, 7 classes, 4 blocks does not fit this run's (width 192, 7",
    )
    r = run_cli([*base, *width[0]], timeout=120)
    assert r.returncode == 2, r.stderr
    one_line_error(r.stderr, width[1])
    cases = [
        (["--arch", "vit_t16", "--pretrained", src], "V-JEPA 2 encoder (RoPE), not vit_t16's"),
        (["--arch", "vit_t16", "--pretrained", src], "give --arch vjepa2_vitt16"),
        (["--pretrained", str(videomae)], "not a V-JEPA 2 encoder; give --arch vit_t16"),
        (["--arch", "vjepa2_1_vitt16", "--pretrained", src], "(--arch vjepa2_vitt16)"),
        (["--probe-weights", str(tmp_path / "probe192.pt")], "7 classes, 4 blocks does not fit"),
        (["--pretrained", src], "no_train.txt"),  # the right file: the list's error
    ]
    for flags, needle in cases:
        with pytest.raises(SystemExit) as e:
            run_main([*base, *flags])
        one_line_error(capsys, needle, exc=e)
    good = ["ucf101", *lists, *PROBE, "--output_root", str(tmp_path / "ok")]
    run_main([*good, "--pretrained", src, "--probe-weights", str(tmp_path / "probeok.pt")])
    assert "probe " in capsys.readouterr().out  # loaded for real after the lists, its one line


def test_features_are_the_mean_token_or_the_probes_query():
    import features
    import probe

    enc = tiny(depth=1).float()
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        f, logits = features.Extractor(enc)(x)
        assert torch.allclose(f, enc.tokens(x).mean(1)) and torch.allclose(logits, enc(x))
        f, _ = features.Extractor(enc, query=True)(x)
        assert torch.allclose(f, enc.head.pooled(enc.tokens(x)))
        heads = [vjepa.AttentiveClassifier(192, 5, depth=1) for _ in range(2)]
        m = probe.ProbedModel(tiny(depth=1).float(), heads).eval()
        m.best.fill_(1)  # the grid's best probe answers and gives the query
        f, logits = features.Extractor(m, query=True)(x)
        assert torch.allclose(f, heads[1].pooled(m.tokens(x))) and torch.allclose(
            logits, heads[1](m.tokens(x))
        )


@pytest.mark.parametrize(
    "recipe, segments, frames, lrs",
    [
        ("sthv2_vjepa2_vitl_probe", 2, 16, 5),
        ("kinetics_vjepa2_vitl_probe", 8, 16, 5),
        ("diving48_vjepa2_vitl_probe", 4, 32, 3),
        ("sthv2_vjepa2_vitg384_probe", 2, 64, 5),
        ("kinetics_vjepa2_vitg384_probe", 8, 16, 5),
        ("diving48_vjepa2_vitg384_probe", 4, 32, 3),
    ],
)
def test_probe_recipes_parse_and_pass_the_checks(recipe, segments, frames, lrs):
    """Each recipe as written: the configs' segments, frames per segment and grid, accepted by
    check_args."""
    import flags
    import train

    args = train.parse_args(
        ["sthv2", "a.txt", "b.txt", f"@recipes/{recipe}.txt", "--device", "cpu"]
    )
    flags.check_args(args)
    assert (args.num_segments, args.t_length, len(args.probe_lrs)) == (segments, frames, lrs)
    assert args.probe == "attentive" and args.probe_blocks == 4 and args.probe_heads == 16
    assert args.crop_size == (384 if "vitg384" in recipe else 256)


def test_a_vjepa2_hub_id_loads_from_the_cache_offline(tmp_path, capsys, monkeypatch):
    """facebook/vjepa2-... by Hub id: read from a Hub cache the test fills, with no network."""
    hub = pytest.importorskip("huggingface_hub")

    hf_pair(tmp_path, classify=False)
    rev = "0" * 40
    root = tmp_path / "hub" / "models--tiny-org--tiny-vjepa2"
    shutil.copytree(tmp_path / "hf", root / "snapshots" / rev)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(rev)
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", True)
    by_id, by_folder = tiny(), tiny()
    zoo.load_pretrained(by_id, "tiny-org/tiny-vjepa2")
    zoo.load_pretrained(by_folder, str(tmp_path / "hf"))
    assert "transformers" in capsys.readouterr().out
    for (k, a), b in zip(by_id.state_dict().items(), by_folder.state_dict().values()):
        if not k.startswith("head."):
            assert torch.equal(a, b), k


# ---- V-JEPA 2.1 (app/vjepa_2_1): the same blocks with its differences ----------------------------


def official21(arch, frames=16, size=384):
    """2.1's VisionTransformer as src/hub/backbones.py builds it (use_rope, interpolate_rope, the
    image tokenizer, modality embeddings) for `arch`'s width, depth and heads."""
    s = vjepa.VJEPA_SPECS[arch]
    return ovit21.VisionTransformer(
        img_size=(size, size),
        num_frames=frames,
        patch_size=16,
        tubelet_size=2,
        embed_dim=s.width,
        depth=s.depth,
        num_heads=s.heads,
        mlp_ratio=s.mlp_ratio,
        qkv_bias=True,
        norm_layer=LN,
        use_sdpa=True,
        uniform_power=False,
        use_rope=True,
        img_temporal_dim_size=1,
        interpolate_rope=True,
    )


def pair21(arch, seed=0):
    """(ours, official 2.1) with the official's random weights, through vjepa_zoo's 2.1 rules."""
    import vit_zoo
    import vjepa_zoo

    theirs = randomise(official21(arch).double(), seed)
    state, dropped, unexpected = vit_zoo.convert(theirs.state_dict(), vjepa_zoo.V21_RULES)
    assert len(dropped) == 9 and not unexpected  # 3 deep-supervision norms, the image tokenizer
    ours = vjepa.build(arch, 3).double().eval()
    missing = ours.load_state_dict(state, strict=False)
    assert not missing.unexpected_keys
    assert all(k.startswith("head.") for k in missing.missing_keys)
    return ours, theirs


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch, shape",
    [
        # vit_tiny whole (12 blocks: the least the official builds), H != W: rows onto 0..15
        ("vjepa2_1_vitt16", (2, 3, 4, 48, 32)),
        # built for 16 frames at 384 px, run at 32 and 64 frames (time is not rescaled)
        ("vjepa2_1_vitt16", (1, 3, 32, 32, 48)),
        ("vjepa2_1_vitt16", (1, 3, 64, 32, 32)),
        # the published 384 px: 24 rows onto 0, 15/23, ..., 15
        ("vjepa2_1_vitt16", (1, 3, 2, 384, 384)),
    ],
)
def test_v21_encoder_tokens_equal_the_official(arch, shape):
    ours, theirs = pair21(arch)
    x = torch.randn(shape, dtype=torch.float64)
    with torch.no_grad():
        got, want = ours.tokens(x), theirs(x)
    assert (
        got.shape
        == want.shape
        == (shape[0], shape[2] // 2 * shape[3] // 16 * shape[4] // 16, ours.spec.width)
    )
    assert rel(got, want) < REL


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch", ["vjepa2_1_vitb16", "vjepa2_1_vitl16", "vjepa2_1_vitg16", "vjepa2_1_vitG16"]
)
def test_v21_blocks_of_the_published_widths_equal_the_official_block(arch):
    """ViT-B, ViT-L, ViT-g (22 heads, MLP 48/11) and ViT-G (26 heads, MLP 64/13): the official 2.1
    Block (modules.py, RoPE interpolated, channel pairs corrected) against ours, on 2 x 3 x 2
    tokens (the official encoder builds no fewer than 12 blocks: the block alone is compared)."""
    s = vjepa.VJEPA_SPECS[arch]
    theirs = omod21.Block(
        dim=s.width,
        num_heads=s.heads,
        mlp_ratio=s.mlp_ratio,
        qkv_bias=True,
        norm_layer=LN,
        use_rope=True,
        grid_size=24,
        interpolate_rope=True,
        patch_size=16,
    )
    theirs = randomise(theirs.double())
    ours = vjepa.Block(s.width, s.heads, s.mlp_ratio, rope_pairs=s.rope_pairs).double().eval()
    ours.load_state_dict(theirs.state_dict())
    assert ours.mlp.fc1.out_features == theirs.mlp.fc1.out_features
    x = torch.randn(2, 12, s.width, dtype=torch.float64)
    pos = vjepa.token_positions(2, 3, 2, "cpu", s.rope_grid)
    with torch.no_grad():
        assert rel(ours(x, pos), theirs(x, T=2, H_patches=3, W_patches=2)[0]) < REL


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["vjepa2_vitt16", "vjepa2_1_vitt16"])
def test_under_bf16_autocast_the_encoders_equal_the_official_bit_for_bit(arch):
    """V-JEPA 2's positions are integers (angles in bf16), 2.1's float32 (angles in float32,
    rotated channels cast back by SDPA's autocast): each computed as its own code does."""
    if arch.startswith("vjepa2_1"):
        ours, theirs = pair21(arch)
    else:
        ours, theirs = pair(arch, 2)
    ours, theirs = ours.float(), theirs.float()
    x = torch.randn(1, 3, 4, 48, 32)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = ours.tokens(x), theirs(x)
    assert got.dtype == want.dtype == torch.bfloat16 and torch.equal(got, want)


def test_v21_rotation_pairs_share_a_frequency():
    """2.1: the pair (2, 3) of a 20-channel axis turns by frequency 1 (repeat_interleave)."""
    x = torch.zeros(1, 1, 1, 20, dtype=torch.float64)
    x[..., 2] = 1.0
    y = vjepa.rotate(x, torch.tensor([1]), pairs=True)
    omega = 1.0 / 10000 ** (torch.arange(10, dtype=torch.float64) / 10)
    assert torch.allclose(y[0, 0, 0, 2], torch.cos(omega[1]))
    assert torch.allclose(y[0, 0, 0, 3], torch.sin(omega[1]))


def test_v21_geometry_needs_two_patches_a_side():
    """interpolate_rope divides by rows - 1: one row of patches is refused, not turned to NaN."""
    assert "at least 32" in vjepa.geometry_error("vjepa2_1_vitt16", 16, 16)
    assert vjepa.geometry_error("vjepa2_1_vitt16", 16, 32) is None
    assert vjepa.geometry_error("vjepa2_vitt16", 16, 16) is None
    with pytest.raises(ValueError, match="at least 32 px"):
        vjepa.build("vjepa2_1_vitt16", 2, depth=1)(torch.zeros(1, 3, 2, 16, 32))


def save_official21(path, width=192, seed=0):
    """A 2.1 pretraining checkpoint (app/vjepa_2_1/train.py): encoder, target_encoder and
    ema_encoder under `module.backbone.`, and a predictor; vit_tiny-shaped, float64."""
    arch = {192: "vjepa2_1_vitt16"}[width]
    encs = {k: randomise(official21(arch).double(), i) for i, k in enumerate(ENCODER_KEYS)}
    ckpt = {
        k: {"module.backbone." + n: v for n, v in m.state_dict().items()} for k, m in encs.items()
    }
    ckpt["predictor"] = {"module.predictor_embed.weight": torch.zeros(1)}
    torch.save(ckpt, path)
    return encs


ENCODER_KEYS = ("encoder", "target_encoder", "ema_encoder")


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, "ema_encoder"])
def test_v21_official_pt_loads_with_one_report_line(tmp_path, capsys, key):

    encs = save_official21(tmp_path / "vjepa2_1_vitt_384.pt")
    m = vjepa.build("vjepa2_1_vitt16", 5).double().eval()
    zoo.load_pretrained(m, str(tmp_path / "vjepa2_1_vitt_384.pt"), vjepa_key=key)
    line = capsys.readouterr().out
    x = torch.randn(1, 3, 4, 32, 48, dtype=torch.float64)
    with torch.no_grad():
        assert rel(m.tokens(x), encs[key or "target_encoder"](x)) < REL
    assert line.count("\n") == 1 and f"official 2.1 '{key or 'target_encoder'}'" in line
    assert "dropped 9 (img_mod_embed, patch_embed_img.proj.weight" in line


def test_v21_distilled_base_and_large_read_ema_encoder_by_default(tmp_path, capsys):
    """backbones.py reads the distilled ViT-B / ViT-L from `ema_encoder`: so does --pretrained."""

    m = vjepa.build("vjepa2_1_vitb16", 5, depth=1).eval()
    sd = {n.replace("norm.", "norms_block.3."): v for n, v in m.state_dict().items()}
    sd = {n: v for n, v in sd.items() if not n.startswith("head.")}
    sd.update(
        {f"norms_block.{j}.{p}": torch.ones(768) for j in range(3) for p in ("weight", "bias")}
    )
    # three encoders told apart by their weights
    ckpt = {k: {n: v + i for n, v in sd.items()} for i, k in enumerate(ENCODER_KEYS)}
    torch.save(ckpt, tmp_path / "vjepa2_1_vitb_dist_vitG_384.pt")
    zoo.load_pretrained(m, str(tmp_path / "vjepa2_1_vitb_dist_vitG_384.pt"))
    assert "official 2.1 'ema_encoder'" in capsys.readouterr().out
    assert torch.equal(m.blocks[0].attn.qkv.weight, ckpt["ema_encoder"]["blocks.0.attn.qkv.weight"])


@pytest.mark.slow
def test_a_v21_file_for_a_v2_arch_and_the_reverse_are_refused_naming_the_arch(tmp_path):

    save_official21(tmp_path / "v21.pt")
    save_official(tmp_path / "v2.pt", depth=4)
    cases = [
        (
            vjepa.build("vjepa2_vitt16", 5, depth=12),
            "v21.pt",
            "V-JEPA 2.1 encoder",
            "vjepa2_1_vitt16",
        ),
        (vjepa.build("vjepa2_1_vitt16", 5, depth=4), "v2.pt", "V-JEPA 2 encoder", "vjepa2_vitt16"),
    ]
    for m, name, what, fits in cases:
        with pytest.raises(ValueError) as e:
            zoo.load_pretrained(m, str(tmp_path / name))
        msg = str(e.value)
        assert what in msg and f"(--arch {fits})" in msg and "\n" not in msg, msg
