"""Ours, not mmaction2's: a stand-in for mmaction/models/heads/base.py's BaseHead, which stores
the sizes and builds the loss (and imports mmaction's evaluation package). The vendored heads read
only num_classes / in_channels from it; their forward is their own."""

import torch.nn as nn


class BaseHead(nn.Module):
    def __init__(self, num_classes, in_channels, loss_cls=None, **kwargs):
        super().__init__()
        self.num_classes = num_classes
        self.in_channels = in_channels
