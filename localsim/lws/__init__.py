"""LeaderWorkerSet beside the local cluster (`trainium-dra up --with-lws`), for
AWS's UltraServer manifests, which run their groups of nodes as LeaderWorkerSets."""
