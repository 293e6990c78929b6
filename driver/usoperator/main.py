"""`trainium-dra ultraserver-operator`: the simulated Neuron UltraServer operator."""

import logging

from driver.kubeapi.credentials import configuration
from driver.usoperator.flags import parse
from driver.usoperator.operator import Operator


def main(argv: list[str]) -> int:
    flags = parse(argv)
    logging.basicConfig(
        level=flags.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("kopf").setLevel(max(logging.WARNING, logging.getLevelName(flags.log_level)))
    return Operator(flags, configuration(flags.kubeconfig)).run()
