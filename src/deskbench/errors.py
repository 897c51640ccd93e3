"""Errors a user can cause. The CLI turns them into one line on stderr and exit code 2."""


class UserError(Exception):
    """Bad input from the user: a missing file, a bad flag, an unusable corpus directory.

    The message must say what is wrong, where, and how to fix it, in one line.
    """


class QuerySyntaxError(UserError):
    """A search query that cannot be parsed. Agents receive the message as a tool result."""
