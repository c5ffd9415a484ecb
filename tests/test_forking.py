"""docs/forking.md as tested code: every worked example's diff applies to this tree (`git apply` on
a copy of its .py files), its table row counts the lines the diff adds and removes, and (slow tier)
the change it makes is exercised in the copy: the new flag changes the loss, the CSV reader reads a
CSV with a header, the MLP probe trains in place of a linear one, the temporal jitter runs on the
loader, the device decode and --augment_device batch paths."""

import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ENV, REPO

DOC = REPO / "docs" / "forking.md"


def worked_examples():
    """{title: (its diff, its table row's (added, removed))}: docs/forking.md's worked examples."""
    text = DOC.read_text()
    examples = text[text.index("## Worked examples") :]
    rows = {
        title: tuple(map(int, counts))
        for title, *counts in re.findall(
            r"^\| (.+?) \| .+? \| \+(\d+) -(\d+) \| .+ \|$", examples, re.M
        )
    }
    found = re.findall(r"^### (.+?)\n.*?```diff\n(.*?)```", examples, re.M | re.S)
    return {title: (diff, rows.get(title)) for title, diff in found}


EXAMPLES = worked_examples()


def tree_copy(tmp_path):
    """The project's .py files and recipes, copied: what a worked example edits."""
    copy = tmp_path / "tree"
    copy.mkdir()
    for path in REPO.glob("*.py"):
        shutil.copy(path, copy / path.name)
    shutil.copytree(REPO / "recipes", copy / "recipes")
    return copy


def git_apply(diff, where, *flags):
    patch = where / "example.diff"
    patch.write_text(diff)
    return subprocess.run(
        ["git", "apply", *flags, str(patch)], cwd=where, capture_output=True, text=True, timeout=60
    )


# What each example's change does, checked in the copy it was applied to (a script run there).
EXERCISES = {
    "A convnext_tiny TSN backbone": """
        import pytest, torch, flags, train
        common = ["ucf101", "a", "b", "--arch", "convnext_tiny", "--mode", "TSN", "--device", "cpu"]
        common += ["--num_segments", "2", "--t_length", "1"]
        common += ["--new_size", "36", "--crop_size", "32"]
        args = train.parse_args([*common, "--num_classes", "3"])
        flags.check_recipe_args(args)
        assert "convnext_tiny" in train.get_args_parser().format_help()
        model = train.make_model(args).eval()
        assert model(torch.randn(2, 3, 2, 32, 32)).shape == (2, 3)
        with pytest.raises(SystemExit):  # no dropout before its classifier: --dro refused
            flags.check_recipe_args(train.parse_args([*common, "--dro", "0.5"]))
    """,
    "A `--label-noise` flag": """
        import pytest, flags, prepare, train, checkpoint
        synth = dict(classes=4, videos=40, frames=4, size=(32, 32))
        train_list, val_list = prepare.make_synth("synth", **synth)
        argv = ["ucf101", train_list, val_list, "--label-noise", "0.5", "--device", "cpu"]
        args = train.parse_args([*argv, "--t_length", "4", "--new_size", "32", "--crop_size", "32"])
        ds = train.make_dataset(args, train_list, "train")
        labels = lambda: [ds[i][1] for i in range(len(ds))]
        clean = [v.label for v in ds.videos]
        noisy = labels()
        changed = sum(a != b for a, b in zip(clean, noisy))
        assert 10 < changed < 30, changed
        ds.set_epoch(1)
        assert labels() == noisy  # drawn once per video
        val = train.make_dataset(args, val_list, "val")
        assert [val[i][1] for i in range(len(val))] == [v.label for v in val.videos]
        with pytest.raises(SystemExit):  # its group keeps it: a resume cannot change it
            saved = {**vars(args), "label_noise": 0.25}
            checkpoint.check_resume_flags(args, "ck.pth", saved, False, flags.flag_sets())
    """,
    "A `path,label_name` CSV list": """
        import data, train
        with open("train.csv", "w") as f:
            f.write("path,label_name\\nv0.avi,swim\\nv1.avi,run\\nv2.avi,jump\\nv3.avi,run\\n")
        argv = ["mine", "train.csv", "train.csv", "--device", "cpu", "--t_length", "4"]
        args = train.parse_args(argv)
        ds = train.make_dataset(args, "train.csv", "val")
        assert [v.label for v in ds.videos] == [2, 1, 0, 1]
        assert [v.line for v in ds.videos] == [2, 3, 4, 5]
        assert data.class_names(ds.spec, "train.csv") == ["jump", "run", "swim"]
    """,
    "A PolyLoss flag": """
        import pytest, torch, flags, train, checkpoint
        torch.manual_seed(0)
        logits, labels = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
        ce = torch.nn.functional.cross_entropy(logits, labels)
        p_true = logits.softmax(1)[torch.arange(4), labels]
        for extra in ([], ["--probe", "linear"]):
            argv = ["ucf101", "a", "b", "--poly-epsilon", "2", *extra]
            objective = train.classification(train.parse_args(argv))
            poly = ce + 2 * (1 - p_true).mean()
            assert torch.allclose(objective.loss(logits, labels, None, {}), poly)
            grid = torch.stack([logits, logits], 1)  # a probe grid's (B, N, K): each probe's loss
            assert torch.allclose(objective.loss(grid, labels, None, {}), 2 * poly)
        plain = train.classification(train.parse_args(["ucf101", "a", "b"]))
        assert torch.equal(plain.loss(logits, labels, None, {}), ce)
        args = train.parse_args(["ucf101", "a", "b", "--poly-epsilon", "1"])
        with pytest.raises(SystemExit):  # the loss group keeps it: a resume cannot change it
            saved = {**vars(args), "poly_epsilon": 2.0}
            checkpoint.check_resume_flags(args, "ck.pth", saved, False, flags.flag_sets())
    """,
    "A logged gradient norm": """
        import json, os, prepare, train
        synth = dict(classes=2, videos=4, frames=6, size=(40, 36))
        train_list, val_list = prepare.make_synth("synth", **synth)
        argv = ["ucf101", train_list, val_list, "--arch", "resnet10_3d"]
        argv += ["--t_length", "2", "--t_stride", "2"]
        argv += ["--new_size", "36", "--crop_size", "32", "-b", "4", "-j", "0", "--epochs", "1"]
        argv += ["--dro", "0", "--device", "cpu", "--output_root", "out", "--run_name", "r"]
        train.main(train.parse_args(argv))
        (line,) = [json.loads(x) for x in open("out/r/log.jsonl")]
        assert line["train_grad_norm"] > 0, line
    """,
    "A CLS-token ViT variant": """
        import torch, model, train
        argv = ["ucf101", "a", "b", "--arch", "vit_t16_cls", "--t_length", "4", "--crop_size", "32"]
        args = train.parse_args([*argv, "--num_classes", "3", "--opt", "adamw", "--wd", "0.05"])
        net = train.make_model(args)
        assert net.cls_token.shape == (1, 1, 192)
        assert net(torch.randn(2, 3, 4, 32, 32)).shape == (2, 3)
        groups = train.param_groups(net, args)
        decay = {id(p): g["weight_decay"] for g in groups for p in g["params"]}
        assert decay[id(net.cls_token)] == 0 and decay[id(net.head.weight)] == 0.05
    """,
    "An MLP probe": """
        import torch, probe, train
        argv = ["ucf101", "a", "b", "--arch", "vit_t16", "--t_length", "4", "--crop_size", "32"]
        args = train.parse_args([*argv, "--num_classes", "3", "--probe", "mlp", "--opt", "adamw"])
        model = train.make_model(args)
        assert isinstance(model.probes[0], probe.MLPProbe)
        opt = train.make_optimizer(model, args, fused=False)
        x, y = torch.randn(2, 3, 4, 32, 32), torch.tensor([0, 2])
        before = [p.clone() for p in model.probes[0].hidden.parameters()]
        train.classification(args).loss(model(x), y, x, {}).backward()
        opt.step()
        after = model.probes[0].hidden.parameters()
        assert all(not torch.equal(a, b) for a, b in zip(before, after))
    """,
    "A validation number that picks model_best": """
        import torch, checkpoint, train
        args = train.parse_args(["ucf101", "a", "b", "--best-metric", "val_top3"])
        assert args.best_metric == "top3" and train.best_key(args) == "val_top3"
        scores = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
        res = train.scores_metrics(scores, torch.tensor([0, 3]))
        assert (res["top1"], res["top3"]) == (0.0, 0.0)
        assert train.scores_metrics(scores, torch.tensor([1, 1]))["top3"] == 100.0
        assert checkpoint.beats("top3", 50.0, 25.0) and not checkpoint.beats("top3", 20.0, 25.0)
    """,
    "A temporal jitter": """
        import torch, augment, data, gpudecode, prepare, train
        from types import SimpleNamespace
        train_list, _ = prepare.make_synth("synth", classes=2, videos=4, frames=12, size=(40, 36))
        kw = dict(t_length=8, t_stride=1, new_size=36, crop_size=32)
        plain = data.VideoFrameDataset(train_list, finish_crop=True, **kw)
        jitter = data.VideoFrameDataset(train_list, temporal_jitter=0.5, **kw)
        clip = jitter[1][0]
        assert clip.shape == plain[1][0].shape and not torch.equal(clip, plain[1][0])
        # every output frame is one of the plain clip's frames, in order, within one of its place
        frames = [plain[1][0][:, t] for t in range(8)]
        for t in range(8):
            near = range(max(0, t - 1), min(8, t + 2))
            assert any(torch.equal(clip[:, t], frames[s]) for s in near)
        # the device decode path (its dispatch, on the CPU): load_clip replayed on decoded frames
        encoded = data.VideoFrameDataset(train_list, temporal_jitter=0.5, encoded=True, **kw)
        batch = gpudecode.collate_encoded([encoded[1]])
        assert torch.equal(gpudecode.decode_batch(batch, "cpu", encoded)[0][0], clip)
        # --augment_device batch: the jitter in the loader, then the transforms on the batch
        compose = data.clip_transforms(color_jitter=0.4)
        rt = SimpleNamespace(device=torch.device("cpu"), memory_format=torch.contiguous_format,
                             mean=data.MEAN, std=data.STD)
        x = [train.to_model_input(*data.collate([data.VideoFrameDataset(
                train_list, temporal_jitter=0.5, augment=how, **kw)[1]]), rt)[0]
             for how in (compose, augment.BatchAugment(compose))]
        assert torch.equal(x[0], x[1])
        args = train.parse_args(["ucf101", "a", "b", "--temporal-jitter", "0.5", "--device", "cpu"])
        assert train.data_spec(args, "train").temporal_jitter == 0.5
    """,
}


def test_every_worked_example_is_exercised_and_counted():
    assert list(EXAMPLES) == list(EXERCISES), "a worked example without its exercise, or one left"
    for title, (diff, row) in EXAMPLES.items():
        body = [line for line in diff.splitlines() if not line.startswith(("+++", "---"))]
        counted = (
            sum(line.startswith("+") for line in body),
            sum(line.startswith("-") for line in body),
        )
        assert row == counted, f"{title}: the table says +{row[0]} -{row[1]}, the diff {counted}"


@pytest.mark.parametrize("title", list(EXAMPLES))
def test_a_worked_example_applies_to_this_tree(title, tmp_path):
    r = git_apply(EXAMPLES[title][0], tree_copy(tmp_path), "--check")
    assert r.returncode == 0, f"docs/forking.md, {title!r} no longer applies: {r.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("title", list(EXAMPLES))
def test_a_worked_example_does_what_it_says(title, tmp_path):
    copy = tree_copy(tmp_path)
    applied = git_apply(EXAMPLES[title][0], copy)
    assert applied.returncode == 0, applied.stderr
    script = copy / "exercise.py"
    script.write_text(textwrap.dedent(EXERCISES[title]))
    r = subprocess.run(
        [sys.executable, str(script)],
        cwd=copy,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
