"""A simulation of AWS's Neuron UltraServer operator (AWS profile only): a
user's NeuronUltraServerWorkload gets nodes of whole UltraServers, a
ResourceClaimTemplate that lands its pods on exactly those nodes, and a
failure strategy when one of them fails (docs/aws-neuron.md)."""
