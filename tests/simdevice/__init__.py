"""Unit tests of the simulated hardware."""
