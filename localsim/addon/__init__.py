"""Controller managers run beside the local cluster (Kueue for `up --with-kueue`,
LeaderWorkerSet for `up --with-lws`): where their build is, their CRDs and
webhook configurations pointed at the manager on loopback, and the manager as
a child process of the cluster."""
