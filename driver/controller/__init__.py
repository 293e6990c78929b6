"""The UltraServer controller: publishes each rack's ResourceSlices, turns node
health reports into device taints and keeps UltraServer status."""
