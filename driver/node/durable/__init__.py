"""What the node daemon keeps on disk so that nothing is lost on a crash: the
checkpoint, its journal and group commit, atomic writes, the claims' files,
and the named crash points that test them."""
