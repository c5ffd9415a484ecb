"""--fsdp: the model's parameters, gradients and optimizer state sharded over the processes (PyTorch
FSDP2, `torch.distributed.fsdp.fully_shard`), and the sharded checkpoints that go with it
(`torch.distributed.checkpoint`, DCP). Launched as --ddp is (torchrun, srun, several nodes) or as
one plain process (a process group of one).

    model = shard(model, args, rt)            # each block / stage, then the root
    with gathered(model): evaluate(model)     # whole parameters on every rank, no collective
    folder = save_shards(rt, model, optimizer)     # every rank writes its shards; rank 0 names them
    load_shards(path, model, optimizer)       # any number of processes: DCP reshards

What a checkpoint holds under --fsdp: checkpoint.pth stays one ordinary file with the whole model
(gathered on rank 0: what --evaluate, predict, features and export read) and every other field of
checkpoint.py's; its "optimizer" is None and "shards" names the folder beside it that holds the
model and optimizer state as DCP shards (`checkpoint.shards-E.I-N`). The save is atomic: the shards
are written to `checkpoint.shards.tmp`, renamed once DCP has written its metadata, and only then
does checkpoint.pth (itself a temp file, then a rename) name them; the folder the previous
checkpoint.pth names is removed after that. A kill anywhere leaves checkpoint.pth naming a complete
folder.

References: torchtitan (models' parallelize.py `apply_fsdp`: fully_shard per transformer block, then
the root; MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32); components/checkpoint.py: DCP
with get/set_state_dict); the PyTorch FSDP2 tutorial and torch.distributed.checkpoint docs.
"""

import contextlib
import os
import re
import shutil

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

# The submodules that get a fully_shard of their own (each all-gathered just before its forward and
# freed after it), by qualified name; everything else (stems, norms, heads) is the root's group.
UNITS = (
    # a ViT's, V-JEPA's or an attentive probe's transformer blocks (vit.py, vjepa.py, mvit_net.py)
    r"(^|\.)blocks\.\d+$",
    # V-JEPA pretraining's predictor blocks (jepa.Predictor; the encoders' are the rule above)
    r"(^|\.)predictor_blocks\.\d+$",
    # a ResNet's stages (model.ResNet3D, torchvision's 2D ResNets)
    r"(^|\.)layer\d+$",
    # SlowFast's and X3D's stages (slowfast_net.py: s2 ... s5; s1 is the stems)
    r"(^|\.)s[2-5]$",
)
SHARDS_TMP = "checkpoint.shards.tmp"
SHARDS_PREFIX = "checkpoint.shards-"


def units(model):
    """The (name, module) pairs UNITS picks, innermost first (fully_shard goes inside out)."""
    picked = [(n, m) for n, m in model.named_modules() if any(re.search(u, n) for u in UNITS)]
    return sorted(picked, key=lambda nm: -nm[0].count("."))


def policy(amp):
    """--amp bf16: bf16 all-gathers and compute, fp32 master weights (the shards), gradients
    reduced in fp32 (torchtitan's default); else the parameters' own dtype throughout."""
    if amp == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard(model, args, rt):
    """fully_shard each unit, then the root, over all processes (one mesh dimension: ZeRO-3)."""
    mesh = init_device_mesh(rt.device.type, (rt.world_size,))
    mp = policy(args.amp)
    for _, module in units(model):
        fully_shard(module, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    return model


def init_single_process():
    """One plain process with --fsdp: a gloo group of one in an in-process store (no port)."""
    if dist.is_initialized():  # a previous run in this Python process (tests) left its group
        dist.destroy_process_group()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


@contextlib.contextmanager
def gathered(model):
    """Within: every unit's whole parameters on every rank, kept after each forward, so evaluation
    runs no collective (ranks score shards of different lengths, and a bad video stops one rank
    early). The memory of an unsharded model, as DDP's evaluation; the shards come back after."""
    if not isinstance(model, FSDPModule):
        yield
        return
    modules = [m for m in model.modules() if isinstance(m, FSDPModule)]
    model.set_reshard_after_forward(False)
    for m in modules:
        m.unshard()
    try:
        yield
    finally:
        for m in modules:
            m.reshard()
        # training's setting again: the units free their parameters after forward, the root keeps
        # its own for the backward that follows at once (fully_shard's choice for a root)
        model.set_reshard_after_forward(True)
        model.set_reshard_after_forward(False, recurse=False)


def full_model_state(model):
    """The whole state dict, gathered on rank 0 on the CPU (the others get {}): a collective."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


def save_shards(rt, model, optimizer):
    """Every rank writes its shards of the model and optimizer state to run_dir/SHARDS_TMP; rank 0
    renames the complete folder and returns its name (the other ranks: None)."""
    tmp = os.path.join(rt.run_dir, SHARDS_TMP)
    if rt.rank == 0 and os.path.exists(tmp):  # a save killed before its rename
        shutil.rmtree(tmp)
    if rt.world_size > 1:
        dist.barrier()
    model_state, optim_state = get_state_dict(model, optimizer)
    # returns on every rank once rank 0 has written the metadata (DCP's last collective)
    dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=tmp)
    if rt.rank != 0:
        return None
    n = 0
    while os.path.exists(os.path.join(rt.run_dir, f"{SHARDS_PREFIX}{n}")):
        n += 1
    os.replace(tmp, os.path.join(rt.run_dir, f"{SHARDS_PREFIX}{n}"))
    return f"{SHARDS_PREFIX}{n}"


def remove_old_shards(run_dir, keep):
    """Rank 0, after checkpoint.pth names `keep`: every other shards folder goes."""
    for name in os.listdir(run_dir):
        if name.startswith(SHARDS_PREFIX) and name != keep:
            shutil.rmtree(os.path.join(run_dir, name), ignore_errors=True)


def shards_folder(path, ckpt):
    """The shards folder a checkpoint file names (beside it), or a one-line ValueError."""
    folder = os.path.join(os.path.dirname(os.path.abspath(path)), ckpt["shards"])
    if not os.path.isfile(os.path.join(folder, ".metadata")):
        raise ValueError(
            f"--resume {path}: its optimizer state {folder} is missing (a model_best.pth keeps the "
            "weights only, its shards go with the next save): resume from the run's "
            f"checkpoint.pth, or start from these weights with --pretrained {path}"
        )
    return folder


def load_shards(folder, model, optimizer):
    """The model and optimizer state from DCP shards, on however many processes (DCP reshards)."""
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optim_state}
    dcp.load(state, checkpoint_id=folder)
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"]
    )


def per_rank_bytes(model, world_size, opt="adamw"):
    """Bytes of parameters, gradients and optimizer state on the largest rank (rank 0: FSDP2 cuts
    each parameter's dim 0 in world_size chunks, the first ones the largest) of `model`, built on
    the meta device, sharded as shard() shards it over `world_size` ranks under a fake process
    group (no communication, no memory). Measured, not estimated: the parameters are fully_shard's
    local shards, the gradients a shard-shaped tensor per trained parameter (what its reduce-scatter
    leaves), the optimizer state what one step of `opt` makes for those shards. world_size 1: the
    whole model, as every DDP rank holds it."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        mesh = init_device_mesh("cpu", (world_size,))
        for _, module in units(model):
            fully_shard(module, mesh=mesh)
        fully_shard(model, mesh=mesh)
        trained = [p for p in model.parameters() if p.requires_grad]
        for p in trained:
            p.grad = torch.zeros_like(p)
        make = torch.optim.AdamW if opt == "adamw" else torch.optim.SGD
        optimizer = make(trained, lr=0.1, **({} if opt == "adamw" else {"momentum": 0.9}))
        optimizer.step()
        states = [v for state in optimizer.state.values() for v in state.values()]
        return {
            "params": local_bytes(model.parameters()),
            "grads": local_bytes(p.grad for p in trained),
            "optimizer": local_bytes(v for v in states if isinstance(v, torch.Tensor)),
        }
    finally:
        dist.destroy_process_group()


def local_shards(tensors):
    """This rank's part of each tensor: a DTensor's local shard (without grad: the storage itself,
    not a copy), any other tensor as it is. Two modules sharded alike have local shards of the same
    shapes, element for element: what an elementwise update (an EMA) runs on."""
    return [t.to_local() if hasattr(t, "to_local") else t for t in tensors]


def local_bytes(tensors):
    """Bytes this rank holds of `tensors` (a DTensor: its local shard)."""
    return sum(t.numel() * t.element_size() for t in local_shards(tensors))
