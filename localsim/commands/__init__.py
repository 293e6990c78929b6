"""The `trainium-dra` commands of the local cluster: `up`, `down`, `status`,
`top`, `controlplane`, and `make demo`; their flags in one place."""
