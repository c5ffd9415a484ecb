"""How this process was started, for --ddp: by torchrun, or by Slurm's srun (one task per GPU, any
number of nodes). ranks() returns rank, world size and local rank, and under srun sets the
rendezvous address and port. Anything that cannot work is a ValueError of one line naming the
variables (train.py prints it and exits 2), never a rendezvous that waits forever. docs/slurm.md has
the why of each rule.
"""

import os
import re

import torch

TORCHRUN = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
SRUN = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID")


def first_host(nodelist):
    """The first name of a Slurm hostlist: 'gpu[003-010,012],cpu7' -> 'gpu003'. Parsed here, not
    with `scontrol show hostnames`, which needs the cluster's slurm.conf (and retries for a minute
    without it)."""
    # up to the first comma outside brackets
    head = re.match(r"[^,\[]*(?:\[[^\]]*\][^,\[]*)*", nodelist)[0]
    return re.sub(r"\[([^\]\-,]*)[^\]]*\]", r"\1", head)  # each [a-b,c] -> a, zero padding kept


def tasks_on_this_node(names, env):
    """Processes of the job on this node: torchrun's LOCAL_WORLD_SIZE, or this node's entry of
    srun's SLURM_STEP_TASKS_PER_NODE ('2(x3),1': 2 on each of the first 3 nodes, then 1); 0 if not
    said."""
    if names is TORCHRUN:
        return int(env.get("LOCAL_WORLD_SIZE", "0") or 0)
    counts = []
    for part in env.get("SLURM_STEP_TASKS_PER_NODE", env.get("SLURM_TASKS_PER_NODE", "")).split(
        ","
    ):
        if m := re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part):
            counts += [int(m[1])] * int(m[2] or 1)
    node = int(env.get("SLURM_NODEID", "0") or 0)
    return counts[node] if node < len(counts) else 0


def ranks(ddp, device, flag="--ddp"):
    """(rank, world size, local rank). torchrun's variables win (torchrun started by srun, one task
    per node, keeps working); else srun's, with the rendezvous on the first node of the step (where
    task 0 runs with block or cyclic distribution) and port 20000 + job id % 10000, unless
    MASTER_ADDR / MASTER_PORT are set. Not SLURM_LAUNCH_NODE_IPADDR: that is where srun ran, a login
    node when srun runs under salloc. The port stays below 32768, where Linux draws the ephemeral
    ports of outgoing connections."""
    env = os.environ
    # srun's tasks have it; the batch shell has SLURM_PROCID=0 but no step
    step = "SLURM_STEP_ID" in env
    names = TORCHRUN if "RANK" in env or not step else SRUN
    got = [env.get(k, "") for k in names]
    if not ddp:
        if step and env.get("SLURM_NTASKS", "1") != "1":
            raise ValueError(
                f"srun started SLURM_NTASKS={env['SLURM_NTASKS']} tasks without --ddp: each "
                "would train alone into the same run folder; add --ddp"
            )
        return 0, 1, 0
    if not all(v.isdigit() for v in got) or int(got[0]) >= int(got[1]):
        shell = " (no SLURM_STEP_ID: this is the job's batch shell, not an srun task)"
        raise ValueError(
            f"{flag} needs one process per GPU, started by torchrun or srun: "
            + ", ".join(f"{k}={v or 'unset'}" for k, v in zip(names, got))
            + (shell if "SLURM_JOB_ID" in env and not step else "")
        )
    # every process of the node checks the node's count, so none is left waiting for the others
    local = max(int(got[2]) + 1, tasks_on_this_node(names, env))
    if device.startswith("cuda") and local > torch.cuda.device_count():
        gpus = torch.cuda.device_count()
        visible = f"{gpus} GPU(s) (CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES', 'unset')})"
        raise ValueError(
            f"--device cuda: {local} processes on this node ({names[2]}={got[2]}) but this "
            f"process sees {visible}: one task per GPU, i.e. --ntasks-per-node = "
            "--gpus-per-node, no --gpus-per-task / --gpu-bind"
        )
    if names is SRUN:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "localhost"
        env.setdefault("MASTER_ADDR", first_host(nodes))
        env.setdefault("MASTER_PORT", str(20000 + int(got[3]) % 10000))
    return tuple(int(v) for v in got[:3])
