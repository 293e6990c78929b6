"""Kubernetes side of trainium-dra: controller, node plugin and local cluster."""
