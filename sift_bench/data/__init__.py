"""Data sources for the benchmark tasks: offline files, canonical online sources, generated stand-ins."""


class DataNotFoundError(FileNotFoundError):
    """A data set or model is missing; the message says where we looked and how to provide it."""
