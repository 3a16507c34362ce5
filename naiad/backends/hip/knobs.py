"""The hip backend's knobs (``naiad.knobs.hip``): where its linker and ROCm are, declared
through the backend contract (`naiad.backends.compiler.BaseBackend.knob_group`)."""

from __future__ import annotations

from naiad.knobs import KnobGroup, env_bool, env_str


class HIPKnobs(KnobGroup):
    """The in-tree AMD backend's toolchain (naiad/backends/hip/linker.py, driver.py)."""

    lld_path = env_str(
        "NAIAD_LLD_PATH", None,
        "The ld.lld executable that links AMDGPU objects into code objects (hsaco); unset: "
        "ROCm's ($NAIAD_ROCM_PATH/llvm/bin, /opt/rocm/llvm/bin), then the ziglang wheel's.")
    mfma = env_bool(
        "NAIAD_HIP_MFMA", False,
        "1: fp16/bf16 dots on CDNA's matrix cores (v_mfma_f32_32x32x8*), the default of the "
        "hip option mfma; off until it has run on AMD hardware (docs/AMD.md).")
    rocm_path = env_str(
        "NAIAD_ROCM_PATH", None,
        "A ROCm installation (its llvm/bin/ld.lld and lib/libamdhip64.so); unset: /opt/rocm.")


KNOBS = HIPKnobs()
