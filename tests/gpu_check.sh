#!/bin/bash
# On a CUDA machine, from the repository root: bash tests/gpu_check.sh 2>&1 | tee gpu_check.log
# (~1-2 min on one H100). The three CUDA tests that failed once (fp16 NaN x2, resume with dropout), the CPU
# tests of their fixes, then tests/gpu_diag.py: per-step fp16 trace (found_inf, scale, clip norm, momentum
# buffers) before/after the fix, bitwise repeatability of MaxPool3d vs FrameMaxPool backward and of a whole
# resnet10_3d step, and the resume runs compared at the start of epoch 2. Read the VERDICT lines.
cd "$(dirname "$0")/.." || exit 2
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
timeout 400 python -m pytest -v -rA -p no:cacheprovider tests/test_gpu.py tests/test_model.py \
  -k "cuda_steps_never_sync or cuda_fp16_iter_size or cuda_resume_is_exact or fused_sgd or frame_max_pool" \
  2>&1 | tail -n 60
timeout 300 python tests/gpu_diag.py 2>&1 | grep -v "^epoch \|^class \|^[0-9]* \+[0-9.]\+ \+[0-9]\|^top-1\|^done in\|^run folder\|^$"
