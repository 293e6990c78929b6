"""The stand-in nodes: a kubelet stand-in per node (plugin registration,
prepare, pods and their simulated workloads) and the cluster that runs them."""
