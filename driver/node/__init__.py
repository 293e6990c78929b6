"""The node daemon: kubelet DRA plugin, CDI, checkpoint, workload API and metrics."""
