"""The session's kernel: which backend, its handle, hibernation of idle kernels."""
