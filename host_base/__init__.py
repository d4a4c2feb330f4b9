"""The lowest layer: private atomic files, private directories, pid identity and process groups.

Standard library only and no import of any other project package, so every package (harness_store,
kernel_bridge, agent_core, acp_server, continual_eval) can share one copy of each helper.
"""
