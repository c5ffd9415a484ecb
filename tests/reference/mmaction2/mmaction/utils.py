"""Ours, not mmaction2's: a stand-in for mmaction/utils (the heads import a typing alias only)."""

ConfigType = dict


def get_str_type(module):
    """mmaction/utils/misc.py's get_str_type (the vendored MViT calls it in init_weights only)."""
    return module if isinstance(module, str) else module.__name__
