"""The in-tree CPU backend: compiled, vectorized, multithreaded; the default wherever there is
no GPU.  Registered and discovered like any other backend (entry point ``cpu``)."""
