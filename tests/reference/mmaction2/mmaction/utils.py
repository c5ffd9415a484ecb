"""Ours, not mmaction2's: a stand-in for mmaction/utils (the heads import a typing alias only)."""

ConfigType = dict
