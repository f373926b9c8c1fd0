"""The two ways a real tool can be unusable; str() is the whole user-facing message."""


class ToolError(Exception):
    """A tool is missing, unrunnable, the wrong version, or could not be installed."""


class ToolNotFound(ToolError):
    """Nothing was found anywhere: the only case in which ensure() installs."""
