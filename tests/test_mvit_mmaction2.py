"""mmaction2's MViTv2-B files against mmaction2's own MViT (float64), beside test_mvit.py's
PySlowFast file.

The reference is open-mmlab/mmaction2 (Apache-2.0) at commit 4d6c934, the same as the vendored
SlowFast / X3D code: mmaction/models/backbones/mvit.py, models/utils/embed.py (PatchEmbed3D) and
models/heads/mvit_head.py, unchanged under tests/reference/mmaction2 (see its README). mmcv's and
mmengine's helpers are used where installed, else the small stand-ins below (a LayerNorm builder,
a Conv3d builder, to_3tuple; the rest is imported and never called). The network is
configs/recognition/mvit/mvit-base-p244_32x3x1_kinetics400-rgb.py's (arch 'base': 24 layers,
downscale at 2, 5, 21) made narrower as in test_mvit.py (embed_dims 16), on a 4x64x64 clip.
"""

import sys
import types
from unittest import mock

import pytest
import torch
import torch.nn as nn

from conftest import REPO
from test_mvit import CROP, FRAMES, WIDTH, clip, float64_init, narrow

pytestmark = pytest.mark.slow  # two 24-block MViTs in float64

REF = REPO / "tests" / "reference" / "mmaction2"


def _standins():
    """mmcv / mmengine modules for what the vendored files import, where those packages are not
    installed."""
    try:
        import mmcv.cnn  # noqa: F401
        import mmengine.model  # noqa: F401

        return {}
    except ImportError:
        pass

    def unused(*args, **kwargs):
        raise AssertionError("not used by this network")

    def build_norm_layer(cfg, dims):
        assert cfg["type"] == "LN", cfg
        return "ln", nn.LayerNorm(dims, eps=cfg.get("eps", 1e-5))

    def build_conv_layer(cfg, **kw):
        assert cfg["type"] == "Conv3d", cfg
        return nn.Conv3d(**kw)

    def build_activation_layer(cfg):
        assert cfg["type"] == "GELU", cfg
        return nn.GELU()

    class BaseModule(nn.Module):
        def __init__(self, init_cfg=None):
            super().__init__()
            self.init_cfg = init_cfg

    mods = {}
    for name, attrs in {
        "mmcv": {},
        "mmcv.cnn": dict(
            build_activation_layer=build_activation_layer,
            build_norm_layer=build_norm_layer,
            build_conv_layer=build_conv_layer,
        ),
        "mmcv.cnn.bricks": dict(DropPath=unused),
        "mmengine": {},
        "mmengine.logging": dict(MMLogger=object),
        "mmengine.model": dict(BaseModule=BaseModule, ModuleList=nn.ModuleList),
        "mmengine.model.weight_init": dict(
            trunc_normal_=nn.init.trunc_normal_, constant_init=unused, trunc_normal_init=unused
        ),
        "mmengine.runner": {},
        "mmengine.runner.checkpoint": dict(_load_checkpoint_with_prefix=unused),
        "mmengine.utils": dict(
            to_3tuple=lambda x: tuple(x) if isinstance(x, (tuple, list)) else (x,) * 3
        ),
    }.items():
        mods[name] = types.ModuleType(name)
        mods[name].__dict__.update(attrs)
    return mods


# Only while importing: the stand-ins and the vendored `mmaction` must not be what other test
# modules find under those names.
sys.path.insert(0, str(REF))
try:
    with mock.patch.dict(sys.modules, _standins()):
        from mmaction.models.backbones.mvit import MViT
        from mmaction.models.heads.mvit_head import MViTHead
finally:
    sys.path.remove(str(REF))


class Recognizer(nn.Module):
    """mmaction2's Recognizer3D at test time: cls_head(backbone(x)), under the names backbone.* /
    cls_head.* of its .pth files."""

    def __init__(self, backbone, cls_head):
        super().__init__()
        self.backbone, self.cls_head = backbone, cls_head

    def forward(self, x):
        return self.cls_head(self.backbone(x))


def reference():
    """mmaction2's MViTv2-B (the K400 config's backbone and head) at WIDTH, float64, every tensor
    random (float32 values, as the .pth files hold)."""
    arch = dict(embed_dims=WIDTH, num_layers=24, num_heads=1, downscale_indices=[2, 5, 21])
    torch.manual_seed(0)
    with float64_init():
        backbone = MViT(arch=arch, temporal_size=FRAMES, spatial_size=CROP, drop_path_rate=0.0)
        ref = Recognizer(backbone, MViTHead(5, WIDTH * 8, dropout_ratio=0.5)).eval()
    g = torch.Generator().manual_seed(0)
    for name, t in ref.state_dict().items():
        r = torch.rand(t.shape, generator=g, dtype=t.dtype) - 0.5
        if t.dim() == 1:  # LayerNorm scales near 1, every bias random
            t.copy_(1 + 0.4 * r if "norm" in name and name.endswith("weight") else 0.4 * r)
        elif "rel_pos" in name or "cls_token" in name:  # zeros as built
            t.copy_(0.04 * r)
        t.copy_(t.float().double())
    return ref


def test_mmaction2_mvit_pth_gives_mmaction2s_logits_float64(tmp_path, capsys):
    import zoo

    ref = reference()
    state = {k: v.float() for k, v in ref.state_dict().items()}
    path = tmp_path / "mvit-base-p244_32x3x1_kinetics400-rgb.pth"
    torch.save({"meta": {"cfg": "..."}, "state_dict": state}, path)
    with float64_init(), narrow():
        net = zoo.build_model("mvitv2_b", 5, t_length=FRAMES, crop_size=CROP, pretrained=str(path))
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line == f"pretrained {path} (mmaction2, 3D): inflated 0, copied {len(state)}, skipped 0"
    assert net.pretrained_info["mean"] == (0.45, 0.45, 0.45)  # 114.75 / 255, its preprocessor's
    x = clip()
    with torch.no_grad():
        want, got = ref(x), net.eval()(x)
    assert got.shape == want.shape == (1, 5)
    err = ((got - want).norm() / want.norm()).item()
    print(f"relative error {err:.3g}")
    assert err < 1e-12, err
