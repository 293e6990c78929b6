"""The chaos harness: faults, load, hostile input and what must stay true
through them, for the chaos tests and for `make chaos`."""
