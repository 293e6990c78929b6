"""The embedded local cluster: real control-plane binaries run as local processes."""
