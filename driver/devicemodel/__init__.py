"""The device model both sides share: an UltraServer's spec, which node runs
which server, the devices and counters one rack publishes in each profile,
each of its pools' slices as plain data, which the controller wraps into
objects, and the cores a published device gives a node.

Pure and Kubernetes-object-shaped only (plain dicts in, dataclasses out): the
controller, the node daemon and the local cluster import it; it imports none
of them, and `simdevice` (the hardware) stays below it.
"""
