"""naiad-opencl: Naiad's backend for OpenCL 3.0 devices (SPIR-V kernels), shipped as its own
distribution and built only on Naiad's public backend contract."""

__version__ = "0.1.0"
