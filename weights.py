"""A weights source read once: a checkpoint file, a transformers folder (or its weights file), a
Hugging Face Hub id. zoo.py's table (zoo.LAYOUTS) then says which layout the source has and which
archs it fits; the family modules (zoo.py, vit_zoo.py, vjepa_zoo.py, slowfast_zoo.py, mvit_net.py)
rename and copy it. Nothing here knows a family.

    source = weights.read("I3D_8x8_R50.pyth")
    source.state  # tensors in the file's own names, wrappers and DDP / compile prefixes stripped

Files are read as data (checkpoint.load: tensors, numbers, text, numpy arrays), never as code;
transformers folders with safetensors first, never by importing transformers (its layout:
transformers/modeling_utils.py, config.json beside model.safetensors or pytorch_model.bin).
"""

import json
import os
import re
from typing import NamedTuple, Optional

import torch

import checkpoint
from model import strip_prefixes

DROP = None  # a rule's target: the tensor is dropped (reported)
# the dicts a state dict is saved under: ours and torchvision's reference scripts ("model"),
# DeepSpeed ("module", VideoMAE's run_class_finetuning.py --model_key), mmaction2 ("state_dict"),
# PySlowFast and pytorchvideo ("model_state")
WRAPPERS = ("model_state", "model", "module", "state_dict")
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"  # what a clone without git-lfs holds
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # org/name on the Hugging Face Hub
WEIGHT_FILES = (".pth", ".pt", ".pyth", ".pkl", ".bin", ".safetensors", ".tar")  # a file, not an id
HUB_FILES = ["config.json", "preprocessor_config.json", "model.safetensors", "pytorch_model.bin"]
FOLDER_WEIGHTS = HUB_FILES[2:]


class Source(NamedTuple):
    """One weights source, read once."""

    name: str  # as the user gave it: messages name it
    outer: dict  # the file's top-level dict ({} for a transformers folder)
    state: dict  # tensors in the file's names (empty for a V-JEPA 2 or probe file: see outer)
    wrapper: str  # where the tensors were: a WRAPPERS key, "blobs", "bare" or "folder"
    config: Optional[dict] = None  # a transformers folder's config.json
    folder: Optional[str] = None  # the transformers folder (preprocessor_config.json beside)

    @property
    def ours(self):
        """A checkpoint train.py wrote: weights under "model", its flags under "args"."""
        return self.wrapper == "model" and isinstance(self.outer.get("args"), dict)


def few(names, n=3):
    return ", ".join(names[:n]) + (f", ... ({len(names)})" if len(names) > n else "")


def convert(state, rules):
    """Rename by the first matching rule (regex over a whole name, the new name as a template or a
    function of the match, or DROP): (renamed, dropped names, names no rule matched)."""
    out, dropped, unexpected = {}, [], []
    for k, v in state.items():
        for pattern, name in rules:
            m = re.fullmatch(pattern, k)
            if m and name is DROP:
                dropped.append(k)
            elif m:
                out[m.expand(name) if isinstance(name, str) else name(m)] = v
            if m:
                break
        else:
            unexpected.append(k)
    return out, dropped, unexpected


def read_json(path, flag, name):
    """A transformers folder's JSON file -> dict; a broken one is a ValueError naming flag and
    file."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{flag} {name}: {path} is not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{flag} {name}: {path} holds a JSON {type(obj).__name__}, not an object")
    return obj


def check_not_lfs_pointer(path, flag, name):
    """A weights file that is a git-lfs pointer (a Hub repository cloned without git-lfs): say
    so."""
    with open(path, "rb") as f:
        head = f.read(len(LFS_POINTER))
    if head == LFS_POINTER:
        raise ValueError(
            f"{flag} {name}: {path} is a git-lfs pointer ({os.path.getsize(path)} bytes), not the "
            "weights: fetch the real file with `git lfs pull` in that clone (git-lfs installed), "
            "or `hf download ORG/NAME --local-dir FOLDER`"
        )


def read_weights_file(path, flag, name):
    """model.safetensors or pytorch_model.bin of a transformers folder -> state dict."""
    check_not_lfs_pointer(path, flag, name)
    if path.endswith(".bin"):
        try:
            return checkpoint.load(path, flag)
        except ValueError as e:
            raise ValueError(f"{e}; download it again") from None
    import safetensors.torch

    try:
        return safetensors.torch.load_file(path)
    except Exception as e:  # SafetensorError (truncated, bad header), OSError
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(
            f"{flag} {name}: {path} is not a whole safetensors file, truncated or damaged "
            f"({type(e).__name__}: {why}); download it again"
        ) from None


def read_folder(path, flag="--pretrained", name=None):
    """A transformers folder -> (state dict, config dict); a missing, broken or git-lfs pointer file
    is a ValueError of one line naming it."""
    name = name or path
    config_file = os.path.join(path, "config.json")
    if not os.path.isfile(config_file):
        raise ValueError(f"{flag} {name}: a folder without config.json (not a transformers one)")
    config = read_json(config_file, flag, name)
    for file in FOLDER_WEIGHTS:  # safetensors first
        if os.path.isfile(os.path.join(path, file)):
            return read_weights_file(os.path.join(path, file), flag, name), config
    raise ValueError(f"{flag} {name}: no model.safetensors nor pytorch_model.bin in it")


def is_hub_id(src):
    return (
        isinstance(src, str)
        and not os.path.exists(src)
        and bool(HUB_ID.fullmatch(src))
        and not src.endswith(WEIGHT_FILES)
    )


def hub_folder(repo_id, flag="--pretrained"):
    """A Hugging Face Hub model id -> its folder in the Hub cache, downloaded if missing; offline
    (HF_HUB_OFFLINE=1, no network) a cached copy. huggingface_hub is imported here only."""
    try:
        import huggingface_hub
    except ImportError:
        raise ValueError(
            f"{flag} {repo_id}: not a local path; reading it from the Hugging Face Hub needs "
            "huggingface_hub (pip install huggingface_hub)"
        ) from None
    try:
        # the safetensors weights if the repository has them, else pytorch_model.bin: never both
        folder = huggingface_hub.snapshot_download(repo_id, allow_patterns=HUB_FILES[:3])
        if not os.path.isfile(os.path.join(folder, HUB_FILES[2])):
            folder = huggingface_hub.snapshot_download(repo_id, allow_patterns=HUB_FILES)
        return folder
    except Exception as e:  # offline and not cached, no such repo, gated, network errors
        from huggingface_hub import constants

        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        # huggingface_hub >= 1.0 ships the `hf` command (`huggingface-cli` is gone in 2.x)
        raise ValueError(
            f"{flag} {repo_id}: no such local file or folder, and the Hugging Face Hub model could "
            f"not be read ({type(e).__name__}: {why}); download it where the Hub cache is "
            f"({constants.HF_HUB_CACHE}) with `hf download {repo_id}` while online, or give the "
            "path of a folder holding its config.json and model.safetensors"
        ) from None


def caffe2_blobs(blobs):
    """PySlowFast's Caffe2 numpy blobs -> tensors, without the solver's blobs (momentum, lr,
    model_iter), which PySlowFast also skips (slowfast/utils/checkpoint.py)."""
    out = {}
    for k, v in blobs.items():
        if k.endswith("_momentum") or k in ("lr", "model_iter") or not hasattr(v, "dtype"):
            continue
        out[k] = torch.as_tensor(v.copy())  # copy: the pickle's arrays may be read-only
    return out


def unwrap(obj):
    """A loaded checkpoint dict -> (its tensors, where they were: a WRAPPERS key, "blobs", "bare",
    or "" when it holds no state dict: a V-JEPA 2 checkpoint's encoders, a probe's list)."""
    if isinstance(obj.get("blobs"), dict):
        return caffe2_blobs(obj["blobs"]), "blobs"
    for key in WRAPPERS:
        if isinstance(obj.get(key), dict):
            return obj[key], key
    return obj, "bare"


def is_state_dict(state):
    return (
        bool(state)
        and all(isinstance(k, str) for k in state)
        and all(isinstance(v, torch.Tensor) for v in state.values())
    )


def from_dict(obj, name):
    """A checkpoint dict already loaded -> Source (its state empty where it holds no state dict)."""
    state, wrapper = unwrap(obj)
    if not is_state_dict(state):
        state, wrapper = {}, ""
    return Source(name, obj, strip_prefixes(state), wrapper)


def read(src, flag="--pretrained"):
    """SRC (a checkpoint file, a transformers folder or its weights file, a Hub id) -> Source,
    read once. A transformers weights file named directly reads the config.json beside it, as the
    folder does."""
    path = hub_folder(src, flag) if is_hub_id(src) else src
    beside = os.path.dirname(path) or "."
    named = os.path.basename(path) in FOLDER_WEIGHTS
    if named and os.path.isfile(path) and os.path.isfile(os.path.join(beside, "config.json")):
        config = read_json(os.path.join(beside, "config.json"), flag, src)
        state = read_weights_file(path, flag, src)
        return Source(src, {}, strip_prefixes(state), "folder", config, beside)
    if os.path.isdir(path):
        state, config = read_folder(path, flag, src)
        return Source(src, {}, strip_prefixes(state), "folder", config, path)
    if path.endswith(".safetensors") and os.path.isfile(path):  # no config.json beside it
        return Source(src, {}, strip_prefixes(read_weights_file(path, flag, src)), "bare")
    source = from_dict(checkpoint.load(path, flag), src)
    if not source.state and not any(k in source.outer for k in NO_STATE):
        raise ValueError(
            f"{flag} {src}: not a state dict (nor a dict with 'model' / 'state_dict' / "
            "'model_state' / 'module', nor a Caffe2 pickle with 'blobs', nor a V-JEPA 2 "
            "checkpoint)"
        )
    return source


# top-level keys of files whose tensors are not one state dict: V-JEPA 2's pretraining checkpoints
# (one per encoder) and its probes (a list of classifiers); vjepa_zoo.py reads them.
NO_STATE = ("target_encoder", "encoder", "ema_encoder", "classifiers")
