"""The checks of deploy/examples/, each taking the `target` it runs on: the
stand-in rack (tests/e2e/examples/) or real nodes (tests/realnodes/)."""
