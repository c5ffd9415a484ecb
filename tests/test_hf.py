"""The ViTs and the Hugging Face formats: transformers folders (their LayerNorm eps, their faults),
Hub ids read from the Hub cache, `--evaluate --pretrained` of a fine-tuned file, a transformers
folder given to a ConvNet arch, and `train.py export --format hf` read back by transformers.

transformers is the reference where a test compares logits (VideoMAEForVideoClassification's own
forward); those tests skip without it. The folders the other tests read are written by `export
--format hf` from a tiny random vit_t16 checkpoint (4 blocks, 192 wide) at 4 frames x 32 px. Hub ids
never touch the network: the test fills a Hub cache folder itself (models--ORG--NAME/snapshots/REV +
refs/main) and runs offline.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import export
import predict
import vit
import zoo
from conftest import (
    ENV,
    REPO,
    acc_line,
    one_line_error,
    run_main,
    tiny_checkpoint,
    tiny_videomae_config,
)

VIT = dict(arch="vit_t16", num_classes=4, t_length=4, crop_size=32, new_size=36, t_stride=2)
FLAGS = ["--arch", "vit_t16", "--t_length", "4", "--t_stride", "2", "--new_size", "36"]
FLAGS += ["--crop_size", "32", "-j", "0", "--device", "cpu", "-b", "4"]
NAMES = ["a", "b", "c", "d"]


def rel_err(a, b):
    return ((a - b).abs().max() / a.abs().max()).item()


def shrink_tokens(model, scale=0.01):
    """Small tokens (every tensor but the norms' scaled down), so each LayerNorm's input variance is
    near its eps and another eps shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.mul_(scale)


def vit_checkpoint(tmp_path, name="ck.pth", norm_eps=None, seed=0, **kw):
    """A train.py checkpoint of a random vit_t16 (every tensor random: biases and norms too)."""
    kw = dict(VIT, **kw)
    path = tiny_checkpoint(tmp_path / name, NAMES + ["e"] * (kw["num_classes"] - 4), **kw)
    ckpt = torch.load(path, weights_only=False)
    g = torch.Generator().manual_seed(seed)
    ckpt["model"] = {k: torch.randn(v.shape, generator=g) * 0.2 for k, v in ckpt["model"].items()}
    ckpt["args"]["norm_eps"] = norm_eps
    torch.save(ckpt, path)
    return path


def hf_folder(tmp_path, name="hf", **kw):
    """`train.py export --format hf` of a random vit_t16 checkpoint: (folder, checkpoint)."""
    ckpt = vit_checkpoint(tmp_path, f"{name}.pth", **kw)
    assert export.main(["--resume", ckpt, "--format", "hf", str(tmp_path / name)]) == 0
    return tmp_path / name, ckpt


# ---- item: the eps of the weights' source --------------------------------------------------------
@pytest.mark.slow
def test_transformers_folder_runs_with_its_layer_norm_eps(tmp_path, capsys):
    """A folder transformers saved (layer_norm_eps 1e-12, fc_norm 1e-5): its own forward,
    float64."""
    transformers = pytest.importorskip("transformers")
    config = tiny_videomae_config(transformers, layer_norm_eps=1e-12)
    torch.manual_seed(0)
    hf = transformers.VideoMAEForVideoClassification(config).double().eval()
    g = torch.Generator().manual_seed(0)
    for p in hf.parameters():  # every bias, q/v bias and norm random
        p.data.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.1)
    shrink_tokens(hf)
    hf.save_pretrained(tmp_path / "hf")
    x = torch.randn(2, 3, 4, 32, 32, generator=g, dtype=torch.float64)
    m = vit.build("vit_s16", 5, 4, 32, depth=2).double().eval()
    zoo.load_pretrained(m, str(tmp_path / "hf"))
    assert "LayerNorm eps 1e-12 (blocks), 1e-05 (fc_norm)" in capsys.readouterr().out
    with torch.no_grad():
        want = hf(pixel_values=x.transpose(1, 2)).logits  # transformers: (B, T, C, H, W)
        assert rel_err(want, m(x)) < 1e-6
        # the official eps everywhere: other logits, 10x beyond the parity's bound
        m.set_norm_eps(vit.OFFICIAL_EPS)
        assert rel_err(want, m(x)) > 1e-5


@pytest.mark.slow
def test_the_eps_stays_with_the_fine_tuned_checkpoint(tmp_path, lists):
    """Fine-tune from a transformers folder, then --evaluate / predict its checkpoint: the folder's
    eps."""
    folder, _ = hf_folder(tmp_path, norm_eps=(1e-12, 1e-5))
    out = tmp_path / "o"
    argv = ["mine", *lists, *FLAGS, "--epochs", "1", "--pretrained", str(folder)]
    run_main(argv + ["--output_root", str(out), "--run_name", "r"])
    ckpt = torch.load(out / "r" / "checkpoint.pth", weights_only=False)
    assert tuple(ckpt["args"]["norm_eps"]) == (1e-12, 1e-5)
    model, _, _ = predict.load_checkpoint(str(out / "r" / "checkpoint.pth"), "cpu", 1, 1)
    assert model.norm_eps == (1e-12, 1e-5)
    assert {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-12, 1e-5}


# ---- --evaluate --pretrained ---------------------------------------------------------------------
def scores(run_dir):
    (npz,) = Path(run_dir).glob("scores_*.npz")
    return np.load(npz)["scores"]


@pytest.mark.slow
def test_evaluate_a_fine_tuned_folder_as_it_is(tmp_path, lists, capsys):
    """`--evaluate --pretrained FOLDER` scores what `--evaluate --resume` of the same weights
    scores, with the folder's normalisation (preprocessor_config.json) and the views asked for."""
    half = dict(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    folder, ckpt = hf_folder(tmp_path, norm_eps=(1e-6, 1e-5), **half)
    views = ["--test_clips", "2", "--test_crops", "3", "--save_scores"]
    views += ["--output_root", str(tmp_path / "o")]
    common = ["mine", *lists, *FLAGS, "--evaluate", *views]
    top1 = run_main(common + ["--pretrained", str(folder), "--run_name", "p"])
    out = capsys.readouterr().out
    assert "(8 videos, 2x3 views)" in out and acc_line(out)[0] == pytest.approx(top1[0], abs=1e-3)
    run_main(common + ["--resume", ckpt, "--run_name", "r"])
    np.testing.assert_allclose(
        scores(tmp_path / "o" / "p"), scores(tmp_path / "o" / "r"), atol=1e-6
    )
    # the same weights read with ImageNet's mean / std score otherwise: the folder's normalisation
    # acted
    run_main(common + ["--resume", ckpt, "--run_name", "i", "--mean", "0.485", "0.456", "0.406"])
    assert np.abs(scores(tmp_path / "o" / "p") - scores(tmp_path / "o" / "i")).max() > 1e-4


@pytest.mark.parametrize("case", ["backbone", "other_classes"])
def test_evaluate_pretrained_without_a_fitting_head_is_one_line(tmp_path, lists, capsys, case):
    folder, _ = hf_folder(tmp_path, num_classes=5 if case == "other_classes" else 4)
    if case == "backbone":  # VideoMAEModel alone: no fc_norm, no classifier
        import safetensors.torch

        st = folder / "model.safetensors"
        state = safetensors.torch.load_file(st)
        keep = {k: v for k, v in state.items() if k.startswith("videomae.")}
        safetensors.torch.save_file(keep, st)
    argv = ["mine", *lists, *FLAGS, "--evaluate", "--pretrained", str(folder)]
    with pytest.raises(SystemExit) as e:
        run_main(argv + ["--output_root", str(tmp_path / "o")])
    needle = "no classifier" if case == "backbone" else "its classifier has 5 classes"
    one_line_error(capsys, "--evaluate --pretrained", needle, exc=e)


# ---- a ViT file given to a ConvNet arch ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["folder", "pretrained_model", "pth"])
def test_a_vit_file_for_a_convnet_arch_names_the_vit_arch(tmp_path, lists, capsys, kind):
    folder, ckpt = hf_folder(tmp_path)
    if kind == "pth":  # the official layout: vit.py's names, bare
        torch.save(torch.load(ckpt, weights_only=False)["model"], tmp_path / "vit.pth")
        flags = ["--arch", "resnet18_3d", "--pretrained", str(tmp_path / "vit.pth")]
    else:  # no --arch: the default ConvNet
        flags = ["--pretrained" if kind == "folder" else "--pretrained_model", str(folder)]
    argv = ["mine", *lists, "--t_length", "4", "--crop_size", "32", "-j", "0", "--device", "cpu"]
    argv += ["-b", "4"]
    with pytest.raises(SystemExit) as e:
        run_main(argv + flags + ["--output_root", str(tmp_path / "o")])
    err = one_line_error(capsys, "--arch vit_t16", "is a ConvNet", exc=e)
    assert ("transformers VideoMAE folder" in err) == (kind != "pth"), err


# ---- Hub ids, offline, from a cache the test fills -----------------------------------------------
def hub_cache(
    tmp_path, folder, repo="tiny-org/tiny-vit", rev="0123456789abcdef0123456789abcdef01234567"
):
    """The Hub cache layout huggingface_hub reads: models--ORG--NAME/{refs/main,
    snapshots/REV/...}."""
    root = tmp_path / "hub" / f"models--{repo.replace('/', '--')}"
    shutil.copytree(folder, root / "snapshots" / rev)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(rev)
    return tmp_path / "hub"


@pytest.mark.slow
def test_a_hub_id_loads_from_the_cache_offline(tmp_path, lists):
    pytest.importorskip("huggingface_hub")
    folder, _ = hf_folder(tmp_path)
    cache = hub_cache(tmp_path, folder)
    env = {**ENV, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path)}
    argv = ["mine", *lists, *FLAGS, "--evaluate"]
    runs = {  # each its own run folder: the refused one removes the folder it made
        repo: subprocess.Popen(
            [sys.executable, str(REPO / "train.py"), *argv, "--pretrained", repo, "--output_root"]
            + [str(tmp_path / repo)],
            **dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO),
        )
        for repo in ("tiny-org/tiny-vit", "tiny-org/not-cached")
    }
    (out, err), (_, missing) = (p.communicate(timeout=240) for p in runs.values())
    assert runs["tiny-org/tiny-vit"].returncode == 0, err
    assert "pretrained tiny-org/tiny-vit (transformers): loaded" in out
    acc_line(out)
    one_line_error(missing, "tiny-org/not-cached", "hf download tiny-org/not-cached")
    assert runs["tiny-org/not-cached"].returncode == 2 and str(cache) in missing


# ---- export --format hf --------------------------------------------------------------------------
@pytest.mark.parametrize("norm_eps", [(1e-12, 1e-5), None])
def test_export_hf_round_trip_through_transformers(tmp_path, capsys, norm_eps):
    """ours -> export --format hf -> VideoMAEForVideoClassification.from_pretrained -> the same
    logits, float32, rel < 1e-5, with transformers' norms at our eps. transformers runs fc_norm at
    1e-5: a model whose fc_norm ran at 1e-6 (the official eps) differs by that alone (said when
    written), of the order of 1e-5 / the pooled feature's variance: within float32's noise on these
    weights."""
    transformers = pytest.importorskip("transformers")
    folder, ckpt = hf_folder(tmp_path, norm_eps=norm_eps)
    said = capsys.readouterr().out
    assert ("in transformers (logits differ by that)" in said) == (norm_eps is None), said
    hf, info = transformers.VideoMAEForVideoClassification.from_pretrained(
        folder, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert hf.config.id2label == dict(enumerate(NAMES))
    ours, _, _ = predict.load_checkpoint(ckpt, "cpu", 1, 1)
    x = torch.randn(2, 3, 4, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = ours(x), hf.eval()(pixel_values=x.transpose(1, 2)).logits
        assert rel_err(want, got) < 1e-5
    # the position table keeps every token's variance near 1, so in float32 the eps cannot show in
    # the logits: transformers' norms are checked to run at our eps instead
    eps = {type(m).__name__ + str(m.eps) for m in hf.modules() if isinstance(m, torch.nn.LayerNorm)}
    assert eps == {f"LayerNorm{e}" for e in (ours.norm_eps[0], 1e-5)}, eps
    # and back: our loader reads the exported folder to the same weights
    m = vit.build("vit_t16", 4, 4, 32)
    zoo.load_pretrained(m, str(folder))
    assert all(torch.equal(v, ours.state_dict()[k]) for k, v in m.state_dict().items())


def test_export_hf_refuses_what_transformers_cannot_hold(tmp_path, capsys):
    ckpt = tiny_checkpoint(tmp_path / "r.pth")  # a ConvNet
    with pytest.raises(SystemExit) as e:
        export.main(["--resume", ckpt, "--format", "hf", str(tmp_path / "out")])
    one_line_error(capsys, "--format hf", "--arch resnet10_3d", exc=e)


# ---- broken transformers folders: one line, exit 2, in a subprocess ------------------------------
def spoil(folder, case):
    st, cfg = folder / "model.safetensors", folder / "config.json"
    if case == "truncated_safetensors":
        st.write_bytes(st.read_bytes()[: st.stat().st_size // 2])
    elif case == "lfs_pointer":
        st.write_text(
            "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 1234\n"
        )
    elif case == "truncated_bin":
        import safetensors.torch

        torch.save(safetensors.torch.load_file(st), folder / "pytorch_model.bin")
        st.unlink()
        b = folder / "pytorch_model.bin"
        b.write_bytes(b.read_bytes()[: b.stat().st_size // 2])
    elif case == "bad_json":
        text = cfg.read_text()
        cfg.write_text(text[: text.index('"model_type"') + 8])
    elif case == "json_list":
        cfg.write_text("[]")


BROKEN = {
    "truncated_safetensors": ["model.safetensors", "truncated"],
    "lfs_pointer": ["model.safetensors", "git-lfs pointer", "git lfs pull"],
    "truncated_bin": ["pytorch_model.bin", "download it again"],
    "bad_json": ["--pretrained", "config.json", "not valid JSON", "line "],
    "json_list": ["--pretrained", "config.json", "JSON list, not an object"],
}


@pytest.fixture(scope="module")
def broken_runs(tmp_path_factory, lists):
    """`train.py ... --pretrained FOLDER` on each broken folder, each its own process (started
    together: two cores), each with a timeout: {case: (folder, return code, stderr, run folder)}."""
    runs = {}
    for case in BROKEN:
        tmp = tmp_path_factory.mktemp(case)
        folder, _ = hf_folder(tmp)
        spoil(folder, case)
        argv = [
            "mine",
            *lists,
            *FLAGS,
            "--output_root",
            str(tmp / "o"),
            "--pretrained",
            str(folder),
        ]
        p = subprocess.Popen(
            [sys.executable, str(REPO / "train.py"), *argv],
            **dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO),
        )
        runs[case] = (folder, p, tmp / "o")
    done = {}
    for case, (folder, p, out) in runs.items():
        err = p.communicate(timeout=240)[1]
        done[case] = (folder, p.returncode, err, out)
    return done


@pytest.mark.slow
@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_transformers_folder_is_one_line(broken_runs, case):
    folder, code, err, out = broken_runs[case]
    one_line_error(err, str(folder), *BROKEN[case])
    assert code == 2, err
    assert not out.exists() or not any(out.rglob("checkpoint.pth"))


def test_hub_id_syntax():
    import weights

    assert weights.is_hub_id("MCG-NJU/videomae-base-finetuned-kinetics")
    assert not weights.is_hub_id("runs/model_best.pth") and not weights.is_hub_id("kinetics400")
    assert not weights.is_hub_id(str(REPO))


def test_evaluate_a_convnet_zoo_file_as_it_is(tmp_path, lists, capsys):
    """The ConvNet zoos too: a bare state dict (torchvision's layout) scores as --resume of it
    scores."""
    ckpt = tiny_checkpoint(tmp_path / "r.pth", NAMES)
    torch.save(torch.load(ckpt, weights_only=False)["model"], tmp_path / "bare.pth")
    common = ["mine", *lists, "--arch", "resnet10_3d", "--t_length", "4", "--t_stride", "2"]
    common += ["--new_size", "48", "--crop_size", "40", "-j", "0", "--device", "cpu", "-b", "4"]
    common += ["--evaluate", "--save_scores", "--output_root", str(tmp_path / "o")]
    run_main(common + ["--pretrained", str(tmp_path / "bare.pth"), "--run_name", "p"])
    run_main(common + ["--resume", ckpt, "--run_name", "r"])
    np.testing.assert_allclose(
        scores(tmp_path / "o" / "p"), scores(tmp_path / "o" / "r"), atol=1e-6
    )
