"""The frontend: kernels written in the Triton language become verified TTIR, and user errors
become CompilationErrors that point at the user's line and say what to do."""
