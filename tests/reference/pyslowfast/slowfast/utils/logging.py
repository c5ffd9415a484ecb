# Ours, not PySlowFast's: its slowfast/utils/logging.py needs simplejson, iopath and the distributed
# helpers; the vendored model files only call get_logger.
import logging


def get_logger(name):
    return logging.getLogger(name)
