"""SlowFast and X3D (slowfast_net.py) against PySlowFast's own model code, and their checkpoints.

The reference is facebookresearch/SlowFast (Apache-2.0), vendored unchanged under
tests/reference/pyslowfast (see its README) and built from its own config defaults and Kinetics
yaml files, with only the sizes shrunk (frames, crop) so that the tests stay CPU-cheap. Every
comparison is float64 in eval mode with random weights and random BN statistics, batch 1.
"""

import math
import sys
import types

import pytest
import torch
import torch.nn as nn

import model as models
import slowfast_net
from conftest import REPO

pytest.importorskip("pytorchvideo")  # the vendored batchnorm_helper / operators import its layers
REF = REPO / "tests" / "reference" / "pyslowfast"


def _shim_missing():
    """Stand-ins for what the vendored files import but never use in these networks (detectron2's
    ROIAlign, the detection head's) or what fvcore provides when it is not installed."""
    if "detectron2" not in sys.modules:
        d2 = types.ModuleType("detectron2")
        d2.layers = types.ModuleType("detectron2.layers")
        d2.layers.ROIAlign = None
        sys.modules.update({"detectron2": d2, "detectron2.layers": d2.layers})
    try:
        import fvcore.common.config  # noqa: F401
        import fvcore.common.registry  # noqa: F401
        import fvcore.nn.weight_init  # noqa: F401
    except ImportError:
        yacs = pytest.importorskip("yacs.config")
        fv = {n: types.ModuleType(n) for n in ("fvcore", "fvcore.common", "fvcore.nn")}
        fv["fvcore.common.config"] = types.ModuleType("fvcore.common.config")
        fv["fvcore.common.config"].CfgNode = yacs.CfgNode
        fv["fvcore.common.registry"] = registry = types.ModuleType("fvcore.common.registry")
        registry.Registry = lambda name: types.SimpleNamespace(register=lambda: lambda c: c)
        fv["fvcore.nn.weight_init"] = init = types.ModuleType("fvcore.nn.weight_init")
        init.c2_msra_fill = lambda m: nn.init.kaiming_normal_(m.weight, mode="fan_out")
        init.c2_xavier_fill = lambda m: nn.init.xavier_uniform_(m.weight)
        sys.modules.update(fv)


_shim_missing()
sys.path.insert(0, str(REF))
from slowfast.config.defaults import get_cfg  # noqa: E402
from slowfast.models import video_model_builder  # noqa: E402

sys.path.remove(str(REF))


def ref_cfg(yaml, frames, crop, classes=5):
    """PySlowFast's config: its defaults, the zoo's yaml, then the tiny sizes of the test."""
    cfg = get_cfg()
    cfg.merge_from_file(str(REF / "configs" / "Kinetics" / yaml))
    cfg.NUM_GPUS, cfg.MODEL.NUM_CLASSES = 0, classes
    cfg.DATA.NUM_FRAMES, cfg.DATA.TRAIN_CROP_SIZE = frames, crop
    return cfg


def randomise(m, seed=0):
    """Every BN weight, bias and statistic and every bias random (nothing stays 0 or 1: the zero-init
    BNs neither); conv and linear weights keep PySlowFast's random init (scaled to their fan-in, so
    that 100 blocks stay finite)."""
    g = torch.Generator().manual_seed(seed)
    for name, t in m.state_dict().items():
        if t.is_floating_point() and t.dim() <= 1:
            r = torch.rand(t.shape, generator=g, dtype=t.dtype)
            t.copy_(0.5 + r if name.endswith(("running_var", "bn.weight")) else (r - 0.5) * 0.4)
    return m.eval()


def reference(yaml, frames, crop):
    cfg = ref_cfg(yaml, frames, crop)
    cls = video_model_builder.SlowFast if cfg.MODEL.ARCH == "slowfast" else video_model_builder.X3D
    ref = randomise(cls(cfg).double())
    # Eval mode ends in a softmax (MODEL.HEAD_ACT); compare the logits before it.
    if isinstance(ref.head.act, nn.Softmax):
        ref.head.act = nn.Identity() if cfg.MODEL.ARCH == "x3d" else None
    return cfg, ref


def ours(arch, classes=5):
    return models.build_model(arch, classes).double().eval()


# (arch, the zoo's yaml, frames, crop): the fast pathway's frames, a multiple of alpha.
PARITY = [
    ("slowfast_r50_8x8", "SLOWFAST_8x8_R50.yaml", 8, 64),
    ("slowfast_r101_16x8_nl", "c2/SLOWFAST_NLN_16x8_R101_50_50.yaml", 8, 64),
    ("slowfast_r50_4x16", "SLOWFAST_4x16_R50.yaml", 16, 32),
    ("x3d_xs", "X3D_XS.yaml", 4, 64),
    ("x3d_m", "X3D_M.yaml", 4, 64),
]


@pytest.mark.parametrize("arch,yaml,frames,crop", PARITY)
def test_logits_match_pyslowfast_float64(arch, yaml, frames, crop):
    cfg, ref = reference(yaml, frames, crop)
    net = ours(arch)
    # Same names, same shapes: PySlowFast's state dict loads strictly, as its .pyth files do.
    assert list(net.state_dict()) == list(ref.state_dict())
    net.load_state_dict(ref.state_dict())
    x = torch.randn(
        1, 3, frames, crop, crop, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        want = ref([x] if cfg.MODEL.ARCH == "x3d" else slowfast_net_pack(cfg, x))
        got = net(x)
    assert got.shape == want.shape == (1, 5)
    assert ((got - want).norm() / want.norm()).item() < 1e-6


def slowfast_net_pack(cfg, x):
    """PySlowFast's datasets/utils.py pack_pathway_output, transcribed (on a batch, time is dim 2)."""
    fast = x
    slow = torch.index_select(
        x, 2, torch.linspace(0, x.shape[2] - 1, x.shape[2] // cfg.SLOWFAST.ALPHA).long()
    )
    return [slow, fast]


@pytest.mark.parametrize("alpha", [2, 4, 8])
def test_slow_pathway_frames_are_pack_pathway_indices(alpha):
    """The slow pathway sees exactly the frames pack_pathway_output picks, for many clip lengths
    (not always every alpha-th frame: T=32, alpha=4 takes 13, not 12)."""
    cfg = types.SimpleNamespace(SLOWFAST=types.SimpleNamespace(ALPHA=alpha))
    for T in range(alpha, 129, alpha):
        clip = torch.arange(T, dtype=torch.float64).view(1, 1, T, 1, 1).expand(1, 3, T, 2, 2)
        want = slowfast_net_pack(cfg, clip)[0][0, 0, :, 0, 0].long().tolist()
        net = types.SimpleNamespace(
            spec=slowfast_net.SLOWFAST["slowfast_r50_8x8"]._replace(alpha=alpha)
        )
        slow, fast = slowfast_net.SlowFast.pathways(net, clip)
        assert slow[0, 0, :, 0, 0].long().tolist() == want
        assert fast is clip
    assert slowfast_net.slow_indices(32, 4).tolist() == [0, 4, 8, 13, 17, 22, 26, 31]


def test_x3d_expansion_rules():
    """X3D-M's published size (X3D paper Table 3: 3.8M parameters at 400 classes) and the channel /
    depth rules of video_model_builder.X3D."""
    net = models.build_model("x3d_m", 400)
    n = sum(p.numel() for p in net.parameters())
    assert abs(n / 1e6 - 3.8) < 0.05, n
    assert [len(getattr(net, f"s{s}").blocks[0]) for s in (2, 3, 4, 5)] == [3, 5, 11, 7]
    assert (
        net.s5.pathway0_res0.branch2.b.groups == net.s5.pathway0_res0.branch2.b.in_channels == 432
    )
    assert hasattr(net.s3.pathway0_res2.branch2, "se") and not hasattr(
        net.s3.pathway0_res1.branch2, "se"
    )
    assert math.ceil(5.0 * 5) == len(models.build_model("x3d_l", 400).s4.blocks[0])
