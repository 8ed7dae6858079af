"""ptreg: an honest registry of training-runtime attempts."""

__version__ = "0.1.0"
