"""How the kubelet talks to a DRA driver, apart from what the driver's devices mean.

Registration, the unix sockets and their order, the DRA gRPC services
(v1 and v1beta1) and the device health stream live here (`KubeletPlugin`
in plugin.py starts and stops them). The driver behind them implements
`interface.ClaimPreparer` and feeds `healthstream.HealthMonitor`; the
Trainium one is `driver.node`.
"""
