"""The cuda backend's knobs (``naiad.knobs.cuda``): where its toolchain is, declared through
the backend contract (`naiad.backends.compiler.BaseBackend.knob_group`)."""

from __future__ import annotations

from naiad.knobs import KnobGroup, env_str


class CUDAKnobs(KnobGroup):
    """The in-tree NVIDIA backend's toolchain (naiad/backends/cuda/toolchain.py)."""

    ptxas_path = env_str(
        "NAIAD_PTXAS_PATH", None,
        "The ptxas executable that turns PTX into cubins; unset: the nvidia-cuda-nvcc wheel, "
        "$CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, then PATH.")
    libdevice_path = env_str(
        "NAIAD_LIBDEVICE_PATH", None,
        "libdevice.10.bc, NVIDIA's math library for the NVPTX target; unset: the nvidia wheels, "
        "$CUDA_HOME/nvvm/libdevice, $CUDA_PATH/nvvm/libdevice, /usr/local/cuda/nvvm/libdevice.")


KNOBS = CUDAKnobs()
