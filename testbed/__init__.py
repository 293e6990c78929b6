"""What tests and benchmarks share to bring the driver up and drive it: a
control plane with the controller, the local cluster, real nodes, a node
daemon process and its rack, the chaos harness, the example checks, and
waiting for live components. Tests and benchmarks import it; it imports
neither."""
