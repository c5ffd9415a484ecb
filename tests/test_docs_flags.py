"""Every flag and command the project writes down exists: a `--flag` in README.md, docs/*.md,
recipes/*.txt or a string of the project's modules (its messages, help and docstrings) is an option
of one of the project's parsers; on a command line (`python bench.py model --arch ...`, `python
train.py predict ...`) an option of that command's own parser; and `python X.py SUB` names a script
of the project and, for one with subcommands (bench.py, prepare.py), one of them.

Other programs' flags are written down too (torchrun's, Slurm's, the VideoMAE scripts' a recipe
cites): each is listed in OTHERS under the program it belongs to, and is accepted only where the
text names that program (the line; a recipe: its file, whose header cites its source; a module's
string: the string). A flag of ours misspelled as another program's (`--clip_grad` for
`--clip-grad`) is then still caught wherever that program is not named. The flags docs/forking.md's
worked examples add to a fork (`--label-noise`, `--poly-epsilon`, ...) are accepted the same way,
in that page's "Worked examples" section only.

The parsers' options are read from argparse's `_actions` (argparse keeps no public list of them).
"""

import argparse
import ast
import re

import pytest

import bench
import export
import features
import flags
import predict
import prepare
from conftest import REPO

# docs/forking.md's worked examples (that section, to the next "## "): a line there is "named" by
# FORK_EXAMPLE, which no text holds
FORK_EXAMPLES = ("forking.md", "## Worked examples")
FORK_EXAMPLE = "<docs/forking.md's worked examples>"

# (program, words that name it, its flags the project quotes)
OTHERS = (
    (
        "torchrun",
        ("torchrun",),
        {"--nproc_per_node", "--nnodes", "--rdzv_backend", "--rdzv_endpoint"},
    ),
    (
        "Slurm",
        ("srun", "sbatch", "#SBATCH", "squeue", "Slurm", "SLURM", "slurm.md", "launch.py"),
        {
            "--gpu-bind",
            "--gpus-per-node",
            "--gpus-per-task",
            "--ntasks-per-node",
            "--signal",
            "--open-mode",
            "--no-requeue",
            "--kill-on-bad-exit",
            "--me",
        },
    ),
    ("wget", ("wget",), {"--no-check-certificate"}),
    ("pip", ("pip ",), {"--no-deps"}),
    ("the Hugging Face CLI", ("hf download", "huggingface-cli"), {"--local-dir"}),
    ("timm", ("timm",), {"--eval-metric"}),
    # docs/forking.md's worked examples add these flags to a fork: their section alone names them
    (
        "a fork's new flag",
        (FORK_EXAMPLE,),
        {"--label-noise", "--poly-epsilon", "--temporal-jitter"},
    ),
    # placeholders: docs/forking.md's `--your_flag 3`, checkpoint.changed_flags' "--flag was -> now"
    ("a placeholder", ("forking.md",), {"--your_flag"}),
    ("a placeholder", ('"--flag was -> now"',), {"--flag"}),
    (
        "VideoMAE's scripts",
        ("VideoMAE", "finetune.sh", "pretrain.sh", "run_class_finetuning", "run_mae_pretraining"),
        {
            *(
                "--aa",
                "--batch_size",
                "--clip_grad",
                "--color_jitter",
                "--cutmix",
                "--decoder_depth",
            ),
            *("--drop_path", "--fc_drop_rate", "--imagenet_default_mean_and_std", "--input_size"),
            *(
                "--layer_decay",
                "--mask_ratio",
                "--mask_type",
                "--min_lr",
                "--mixup",
                "--mixup_prob",
            ),
            *("--mixup_switch_prob", "--model", "--model_ema", "--model_key", "--num_workers"),
            *("--opt_betas", "--opt_eps", "--recount", "--remode", "--reprob", "--sampling_rate"),
            *("--save_ckpt_freq", "--short_side_size", "--smoothing", "--test_num_crop"),
            *("--test_num_segment", "--train_interpolation", "--use_checkpoint", "--warmup_epochs"),
            *("--warmup_lr", "--weight_decay"),
        },
    ),
)
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
# `python X.py [SUB]` and the rest of its command line (to a shell separator, a comment or a quote)
COMMAND = re.compile(r"python (\w+\.py)(?: ([a-z]\w*))?([^|;&#`\"')\n]*)")


def commands():
    """{command: its option strings}: "train.py" (training and pretraining), "predict.py", ...,
    "bench.py model", "prepare.py lists", ... (a script with subcommands: "bench.py", its own)."""

    def walk(parser, name, out):
        out[name] = set()
        for action in parser._actions:
            out[name] |= set(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    walk(subparser, f"{name} {sub}", out)
        return out

    out = {}
    walk(flags.get_args_parser(), "train.py", out)
    out["train.py"] |= walk(flags.get_args_parser(pretrain=True), "pretrain", {})["pretrain"]
    for name, module in (("predict.py", predict), ("features.py", features), ("export.py", export)):
        walk(module.get_parser(), name, out)
    walk(bench.get_args_parser(), "bench.py", out)
    walk(prepare._parser(), "prepare.py", out)
    out["pytest"] = pytest_options()
    # `python train.py predict ...` runs predict.py (flags.SUBCOMMANDS), pretrain: train.py's own
    for sub in flags.SUBCOMMANDS:
        out[f"train.py {sub}"] = out.get(f"{sub}.py", out["train.py"])
    return out


def pytest_options():
    """The options conftest.py adds to pytest (--trainer-flags)."""
    import conftest

    class Recorder:
        options = set()

        def addoption(self, *names, **kwargs):
            self.options |= set(names)

    recorder = Recorder()
    conftest.pytest_addoption(recorder)
    return recorder.options


def texts():
    """(where, text, context): each line of the docs and recipes, each string of the modules; the
    context is what may name another program: the file's name and the line (a recipe: its whole
    file), or the string."""
    found = []
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for path in [*docs, *sorted((REPO / "recipes").glob("*.txt"))]:
        whole, section = path.read_text(encoding="utf-8"), ""
        for i, line in enumerate(whole.splitlines(), 1):
            section = line if line.startswith("## ") else section
            context = f"{path.name}\n" + (whole if path.suffix == ".txt" else line)
            if (path.name, section) == FORK_EXAMPLES:
                context = f"{FORK_EXAMPLE}\n{context}"
            found.append((f"{path.relative_to(REPO)}:{i}", line, context))
    for path in sorted(REPO.glob("*.py")):
        if path.name.startswith("test_") or path.name == "conftest.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                where = f"{path.name}:{node.lineno}"
                found.append((where, node.value, f"{path.name}\n{node.value}"))
    return found


def others_named(context):
    return {
        flag for _, words, owned in OTHERS if any(w in context for w in words) for flag in owned
    }


def problems(where, text, context, cmds):
    """'where: --flag (why)' for each flag of `text` that no parser (or named program) knows, and
    each `python X.py SUB` that names no script or subcommand."""
    known, bad = set().union(*cmds.values()) | others_named(context), []
    for flag in FLAG.findall(text):
        if flag.rstrip("-_") not in known:
            bad.append(f"{where}: {flag.rstrip('-_')} (no such option)")
    for script, sub, rest in COMMAND.findall(text):
        name = f"{script} {sub}" if f"{script} {sub}" in cmds else script
        if name not in cmds and not (REPO / script).is_file():
            bad.append(f"{where}: python {script} (no such script)")
        elif script in ("bench.py", "prepare.py") and name == script:
            bad.append(f"{where}: python {script} {sub} (no such subcommand)")
        elif name in cmds:
            given = {f.rstrip("-_") for f in FLAG.findall(rest)}
            wrong = given - cmds[name] - others_named(context)
            bad += [f"{where}: {f} (not an option of {name})" for f in sorted(wrong)]
    return bad


def unknown_flags():
    cmds = commands()
    return [msg for where, text, context in texts() for msg in problems(where, text, context, cmds)]


def test_the_parsers_and_texts_are_found():
    """The collection sees what it checks: every command's parser, the docs, recipes and strings."""
    cmds = commands()
    assert {"--probe-lrs", "--clip-grad", "--num_sample"} <= cmds["train.py"]
    assert "--arch" in cmds["bench.py model"] and "--format" in cmds["export.py"]
    where = {w.split(":")[0] for w, _, _ in texts()}
    assert {"README.md", "docs/vjepa.md", "recipes/demo_probe.txt", "flags.py", "probe.py"} <= where


def test_the_check_catches_a_misspelled_flag():
    """A flag of ours spelled as VideoMAE's where VideoMAE is not named, a flag of another command
    on a command line, a script and a subcommand that do not exist: each caught; where VideoMAE is
    named, its flag passes."""
    cmds = commands()
    cases = {
        "`--clip_grad` with a grid is refused": "--clip_grad (no such option)",
        "python bench.py model --epochs 3": "--epochs (not an option of bench.py model)",
        "python train.py predict --iters 3": "--iters (not an option of train.py predict)",
        "python trian.py demo": "python trian.py (no such script)",
        "python bench.py speed --arch x3d_xs": "python bench.py speed (no such subcommand)",
    }
    for text, want in cases.items():
        assert problems("here", text, text, cmds) == [f"here: {want}"], text
    for text in ("VideoMAE's --clip_grad None", "python bench.py model --arch x3d_xs --iters 3"):
        assert problems("here", text, text, cmds) == [], text
    # a worked example's new flag: in that section of docs/forking.md alone
    text = "`--poly-epsilon 2`"
    assert problems("here", text, f"forking.md\n{text}", cmds) == [
        "here: --poly-epsilon (no such option)"
    ]
    assert problems("here", text, f"{FORK_EXAMPLE}\nforking.md\n{text}", cmds) == []


def test_every_flag_and_command_written_down_exists():
    bad = unknown_flags()
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("script", ["bench.py", "prepare.py"])
def test_a_named_subcommand_is_one_of_the_scripts(script):
    cmds = commands()
    subs = {name.split()[1] for name in cmds if name.startswith(script + " ")}
    assert subs, script
