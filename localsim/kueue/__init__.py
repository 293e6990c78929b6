"""Kueue in front of the local cluster's scheduler (`trainium-dra up --with-kueue`)."""
