"""The in-tree NVIDIA backend: Triton-language kernels as PTX/cubin, launched through libcuda
with ctypes (no C compiler, no torch needed).  Registered and discovered like any other backend
(entry point ``cuda``)."""
