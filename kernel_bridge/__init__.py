"""kernel_bridge: persistent IPython kernels over jupyter_client."""
