"""Kernels: programs for one core, built with simdevice.isa.ProgramBuilder."""
