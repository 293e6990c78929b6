"""The real control plane as local processes: its binaries, certificates,
scheduler configuration, release table, and the chart's cluster-wide objects."""
