"""skills: code that runs inside the kernel and talks to the host through the host bridge."""
