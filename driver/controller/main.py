"""`trainium-dra controller`: the UltraServer controller process."""

import logging

from driver.controller.flags import parse
from driver.controller.runner import Controller
from driver.kubeapi.credentials import configuration


def main(argv: list[str]) -> int:
    flags = parse(argv)
    logging.basicConfig(
        level=flags.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kopf").setLevel(max(logging.WARNING, logging.getLevelName(flags.log_level)))
    return Controller(flags, configuration(flags.kubeconfig)).run()
