"""git-lane: lanes for many writers on one repository, main moved only by `git lane land`."""

__version__ = "0.1.0"
