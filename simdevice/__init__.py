"""Simulated AWS Trainium hardware; imports nothing from Kubernetes."""
