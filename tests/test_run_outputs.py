"""Where a command's files go and how they can be read: `--evaluate --pretrained FILE` writes into a
folder of its own (never an earlier training run's), `export --format hf` writes files as the
user's umask says, and a checkpoint transformers cannot hold is refused with the reason."""

import os

import pytest

import export
from conftest import TINY, one_line_error, run_dir, run_main, tiny_checkpoint

VIT = dict(arch="vit_t16", num_classes=4, t_length=4, crop_size=32, new_size=36, t_stride=2)


def test_evaluate_pretrained_writes_into_a_folder_of_its_own(lists, tmp_path, capsys):
    """The flags' run folder holds an earlier run (its log.jsonl): the evaluation's confusion
    matrix and per-class table go to <that name>_evaluate_<file>, whose path is printed, and the
    earlier run's folder is left as it was."""
    (tmp_path / "w").mkdir()
    weights = tiny_checkpoint(tmp_path / "w" / "fine.pth", crop_size=32)
    argv = ["ucf101", *lists, *TINY, "--num_classes", "4", "--output_root", str(tmp_path / "o")]
    earlier = run_dir(tmp_path / "o", argv)
    earlier.mkdir(parents=True)
    (earlier / "log.jsonl").write_text('{"epoch": 0}\n')
    run_main([*argv, "--evaluate", "--pretrained", weights])
    out = capsys.readouterr().out
    assert sorted(p.name for p in earlier.iterdir()) == ["log.jsonl"]
    own = earlier.with_name(earlier.name + "_evaluate_fine")
    assert list(own.glob("confusion_*")) and str(own) in out, out


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_export_hf_writes_files_as_the_umask_says(tmp_path, umask):
    """model.safetensors, config.json, preprocessor_config.json: 0666 less the umask, each (the
    weights were 0600 whatever the umask)."""
    ckpt = tiny_checkpoint(tmp_path / "vit.pth", ["a", "b", "c", "d"], **VIT)
    old = os.umask(umask)
    try:
        assert export.main(["--resume", ckpt, "--format", "hf", str(tmp_path / "hf")]) == 0
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "hf").iterdir()}
    assert set(modes) == {"model.safetensors", "config.json", "preprocessor_config.json"}
    assert set(modes.values()) == {0o666 & ~umask}, modes


@pytest.mark.parametrize("arch", ["vjepa2_vitt16", "resnet10_3d"])
def test_export_hf_of_what_transformers_cannot_hold_says_why(tmp_path, capsys, arch):
    """A V-JEPA 2 checkpoint: transformers' VJEPA2ForVideoClassification keeps one LayerNorm eps for
    the encoder and the probe (and the encoder's heads in the probe), so it would not give the
    checkpoint's logits: said in one line, with the formats that do (not "is not a ViT")."""
    ckpt = tiny_checkpoint(tmp_path / "m.pth", **dict(VIT, arch=arch))
    with pytest.raises(SystemExit) as e:
        export.main(["--resume", ckpt, "--format", "hf", str(tmp_path / "hf")])
    if arch == "resnet10_3d":
        one_line_error(capsys, "--arch resnet10_3d is not one: use --format onnx or pt2", exc=e)
        return
    one_line_error(
        capsys,
        "VJEPA2ForVideoClassification",
        "one LayerNorm eps for the encoder (1e-06) and the attentive probe (1e-05",
        "encoder's 3 heads (16 here)",
        "use --format onnx or pt2",
        exc=e,
    )
