"""The error every refused setting raises."""


class ConfigError(ValueError):
    """A setting has a value that is not allowed; the message names the setting, the value and what is allowed."""
