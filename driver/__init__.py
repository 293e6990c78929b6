"""Kubernetes side of trainium-dra: controller, node plugin, UltraServer operator
and the workload entry point; what the image carries."""
