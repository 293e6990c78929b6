"""The node daemon's side of the simulated hardware: the server each node
hosts, the workload API containers call, the fault controls and the hardware
metrics."""
