"""Errors a user can cause. The CLI turns them into one line on stderr and exit code 2."""

from pathlib import Path


class UserError(Exception):
    """Bad input from the user: a missing file, a bad flag, an unusable corpus directory.

    The message must say what is wrong, where, and how to fix it, in one line.
    """


class QuerySyntaxError(UserError):
    """A search query that cannot be parsed. Agents receive the message as a tool result."""


def read_user_file(path: Path, what: str) -> bytes:
    """The bytes of a file the user named; `what` says which (e.g. "--page-text", "the predictions
    file"), so a missing file, a folder or an unreadable one is one line naming it."""
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise no_such_file(path, what) from exc
    except IsADirectoryError as exc:
        raise UserError(f"{path} is a directory; give {what} as a JSON Lines file") from exc
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc


def no_such_file(path: Path, what: str) -> UserError:
    """`PATH: no such file (did you mean ...?); check the path of WHAT`: a typo, with the files of
    its kind nearby (deskbench/nearby.py)."""
    from deskbench.nearby import hint, nearby

    near = hint(path, nearby(path, lambda p: p.is_file() and p.suffix == path.suffix), f"{path.suffix or 'such'} files")
    return UserError(f"{path}: no such file{near}; check the path of {what}")
