"""Errors a user can cause. The CLI turns them into one line on stderr and exit code 2."""

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

if TYPE_CHECKING:  # typing.TypeIs is Python 3.13's; only mypy reads it here
    from typing_extensions import TypeIs

Choice = TypeVar("Choice", bound=str)


class UserError(Exception):
    """Bad input from the user: a missing file, a bad flag, an unusable corpus directory.

    The message must say what is wrong, where, and how to fix it, in one line.
    """


class QuerySyntaxError(UserError):
    """A search query that cannot be parsed. Agents receive the message as a tool result."""


def is_one_of(value: str, allowed: tuple[Choice, ...]) -> "TypeIs[Choice]":
    """Whether `value` is one of `allowed`, narrowing it to their type: `allowed` is a Literal
    alias's values (`VIEWS: tuple[View, ...] = get_args(View)`), so a `str` from a flag, a form or
    a file meets a `Literal` field checked, not cast."""
    return value in allowed


def one_of(value: str, allowed: tuple[Choice, ...], what: str) -> Choice:
    """`value` narrowed to one of `allowed` (see `is_one_of`), or one line naming it and what is
    allowed: `--ocr 'x' is not valid; use never, auto or always` (`what` is the flag or field)."""
    if is_one_of(value, allowed):
        return value
    raise UserError(f"{what} {value!r} is not valid; use {spoken_list(allowed)}")


def spoken_list(words: tuple[str, ...]) -> str:
    """`a, b or c` (`a or b`, `a`): the values a message offers."""
    return " or ".join(w for w in (", ".join(words[:-1]), words[-1] if words else "") if w)


def _not_regular(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_user_file(path: Path, what: str, max_bytes: int | None = None) -> BinaryIO:
    """A file the user named, opened for reading only if it is a regular file (a FIFO would block,
    /dev/zero never ends) of at most `max_bytes`; else one line naming it. Opened without blocking
    and checked on the open file (no race with a rename); `what` says which file it is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise no_such_file(path, what) from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory; give {what} as a JSON Lines file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UserError(f"{path} is a directory; give {what} as a JSON Lines file")
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path} is {_not_regular(info.st_mode)}, not a regular file; {what} is read only from "
                            "a file on disk: save it to a file and give that")
        if max_bytes is not None and info.st_size > max_bytes:
            raise UserError(f"{path} is {megabytes(info.st_size)}, over the {megabytes(max_bytes)} cap of {what}; "
                            "split it into smaller files")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def megabytes(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MB" if n >= 1 << 20 else f"{n:,} bytes"


def read_user_file(path: Path, what: str, max_bytes: int | None = None) -> bytes:
    """The bytes of a file the user named; `what` says which (e.g. "--page-text", "the predictions
    file"), so a missing file, a folder, a pipe or device, one over `max_bytes` or an unreadable
    one is one line naming it."""
    with open_user_file(path, what, max_bytes) as fh:
        try:
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        except OSError as exc:
            raise UserError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise grew_past(path, max_bytes, what)
    return data


def grew_past(path: Path, max_bytes: int, what: str) -> UserError:
    """A file that passed its size cap when opened and was past it once read (written meanwhile)."""
    return UserError(f"{path} is over the {megabytes(max_bytes)} cap of {what} (it grew while read); "
                     "split it into smaller files")


def no_such_file(path: Path, what: str) -> UserError:
    """`PATH: no such file (did you mean ...?); check the path of WHAT`: a typo, with the files of
    its kind nearby (deskbench/nearby.py)."""
    from deskbench.nearby import hint, nearby

    near = hint(path, nearby(path, lambda p: p.is_file() and p.suffix == path.suffix), f"{path.suffix or 'such'} files")
    return UserError(f"{path}: no such file{near}; check the path of {what}")
