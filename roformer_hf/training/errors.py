"""The exception a mistake in a script's arguments or data raises; its message names the problem and the fix."""


class ScriptError(Exception):
    """A mistake in a script's arguments or data; the message names the problem and the fix."""
