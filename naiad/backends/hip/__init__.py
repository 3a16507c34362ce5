"""The in-tree AMD backend: Triton-language kernels as AMDGPU code objects (hsaco) from the
shared GPU lowering, for CDNA (gfx90a, gfx942, gfx950; wave64) and RDNA (gfx1100, gfx1200;
wave32).  It compiles on any machine (LLVM's AMDGPU target through llvmlite, LLD to link);
it launches through libamdhip64 where ROCm is installed.  Registered and discovered like any
other backend (entry point ``hip``)."""
