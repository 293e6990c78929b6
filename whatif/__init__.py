"""Fleet what-if: job traces (generated, or read from a published trace) and
an offline event simulator that places them on simulated racks with an
idealized first-fit or best-fit rule, as the anchor a replay through the real
scheduler is compared against."""
