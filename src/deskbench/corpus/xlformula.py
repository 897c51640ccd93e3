"""A small Excel formula evaluator for workbooks whose formula cells carry no cached value.

Files written by openpyxl (our generators, agents' outputs) never hold cached results, so
`data_only=True` reads their formula cells as empty. We evaluate them ourselves instead of
depending on the `formulas` package (12 s for 5,000 formula cells on this machine, pulls in
schedula and prints progress bars) or `pycel` (a 2021 beta, 5 s for the same workbook).
This covers arithmetic, comparison, `&`, `%`, cell/range/cross-sheet references and the common
functions in xlcalc.py; anything else becomes an `Unevaluated` value that names the formula,
never an empty cell. Excel errors (#DIV/0! ...) are ordinary values, as in Excel.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from openpyxl.utils.cell import column_index_from_string

from deskbench.corpus.xlvalues import ExcelError, arith, binary
from deskbench.untrusted.limits import FileLimitError, FileLimits, LimitExceeded, current_limits


class Unsupported(Exception):
    """The formula uses something outside this evaluator (the message says what)."""


_TOKEN = re.compile(
    r"""(?P<ws>\s+)
    |(?P<str>"(?:[^"]|"")*")
    |(?P<err>\#DIV/0!|\#N/A|\#NAME\?|\#NULL!|\#NUM!|\#REF!|\#VALUE!)
    |(?P<func>[A-Za-z_][\w.]*)\(
    |(?:(?P<sheet>'(?:[^']|'')+'|[A-Za-z_][\w.]*)!)?
     (?P<ref>\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?|\$?[A-Za-z]{1,3}:\$?[A-Za-z]{1,3})
     (?![\w(!])
    |(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    |(?P<bool>TRUE|FALSE)(?![\w(])
    |(?P<op><>|<=|>=|[-+*/^&=<>%(),;])
    |(?P<name>\S+)""",
    re.VERBOSE | re.IGNORECASE,
)

Node = tuple[Any, ...]


def _tokens(formula: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for m in _TOKEN.finditer(formula):
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind == "name":
            raise Unsupported(f"unknown name {m.group('name')!r}")
        if m.group("ref"):
            out.append(("ref", (_sheet_name(m.group("sheet")), m.group("ref").replace("$", "").upper())))
        elif kind == "sheet":  # a sheet prefix matched without a reference after it
            raise Unsupported(f"unsupported reference near {m.group(0)!r}")
        else:
            out.append((kind or "", m.group(kind or 0)))
    out.append(("end", None))
    return out


def _sheet_name(raw: str | None) -> str | None:
    if raw is None:
        return None
    return raw[1:-1].replace("''", "'") if raw.startswith("'") else raw


class _Parser:
    """Recursive descent over Excel precedence: comparison < & < +- < */ < ^ < unary < %."""

    def __init__(self, formula: str) -> None:
        self.toks = _tokens(formula)
        self.i = 0

    def peek(self) -> tuple[str, Any]:
        return self.toks[self.i]

    def take(self) -> tuple[str, Any]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, op: str) -> None:
        kind, val = self.take()
        if kind != "op" or val != op:
            raise Unsupported(f"expected {op!r}, found {val!r}")

    def parse(self) -> Node:
        node = self.binary(0)
        if self.peek()[0] != "end":
            raise Unsupported(f"unexpected {self.peek()[1]!r}")
        return node

    LEVELS: tuple[tuple[str, ...], ...] = (("=", "<>", "<", ">", "<=", ">="), ("&",), ("+", "-"), ("*", "/"), ("^",))

    def binary(self, level: int) -> Node:
        if level == len(self.LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self.LEVELS[level]:
            op = self.take()[1]
            node = ("bin", op, node, self.binary(level + 1))
        return node

    def unary(self) -> Node:
        kind, val = self.peek()
        if kind == "op" and val in "+-":
            self.take()
            inner = self.unary()
            return ("neg", inner) if val == "-" else inner
        node = self.primary()
        while self.peek() == ("op", "%"):
            self.take()
            node = ("pct", node)
        return node

    def primary(self) -> Node:
        kind, val = self.take()
        if kind == "num":
            return ("lit", float(val) if any(c in val for c in ".eE") else int(val))
        if kind == "str":
            return ("lit", val[1:-1].replace('""', '"'))
        if kind == "bool":
            return ("lit", val.upper() == "TRUE")
        if kind == "err":
            return ("lit", ExcelError(val.upper()))
        if kind == "ref":
            return ("ref", *val)
        if kind == "func":
            return self.call(val.upper().removeprefix("_XLFN.").removeprefix("_XLWS."))
        if (kind, val) == ("op", "("):
            node = self.binary(0)
            self.expect(")")
            return node
        raise Unsupported(f"unexpected {val!r}")

    def call(self, name: str) -> Node:
        args: list[Node] = []
        if self.peek() == ("op", ")"):
            self.take()
            return ("call", name, args)
        while True:
            if self.peek()[0] == "op" and self.peek()[1] in ",;)":
                args.append(("lit", None))  # an omitted argument
            else:
                args.append(self.binary(0))
            kind, val = self.take()
            if (kind, val) == ("op", ")"):
                return ("call", name, args)
            if kind != "op" or val not in ",;":
                raise Unsupported(f"expected ',' or ')' in {name}(), found {val!r}")


def parse(formula: str) -> Node:
    """The syntax tree of `formula` (with or without its leading '='); Unsupported if it is
    outside the grammar."""
    return _Parser(formula.removeprefix("=")).parse()


Grid = list[list[Any]]
CellLookup = Callable[[str, int, int], Any]
"""(sheet, row, col) -> value, evaluating formula cells on demand; both indices 1-based."""


class CellBudget:
    """The cells formula ranges may read: one range at most `range_cells` (A3:XFD1048576 is 17
    billion), all formulas of a workbook together at most `formula_cells`. Over either, the
    workbook is over a limit (FileLimitError): its values cannot be computed in bounded time."""

    def __init__(self, limits: FileLimits | None = None) -> None:
        limits = limits or current_limits()
        self.range_cells, self.formula_cells = limits.range_cells, limits.formula_cells
        self.used = 0
        self.where = ""  # the formula cell being computed, for the verdict

    def spend(self, ref: str, n: int) -> None:
        if n > self.range_cells:
            raise FileLimitError(LimitExceeded(what="range_cells", limit=self.range_cells, observed=n,
                                               detail=f"the range {ref} in {self.where or 'a formula'}"))
        self.used += n
        if self.used > self.formula_cells:
            raise FileLimitError(LimitExceeded(what="formula_cells", limit=self.formula_cells,
                                               observed=self.used))


Function = Callable[["Evaluator", list[Node]], Any]
"""A worksheet function: gets the evaluator and its unevaluated arguments (IF needs laziness)."""


class Evaluator:
    """Evaluates syntax trees against a workbook through `lookup`; `sheet` is the formula's own."""

    def __init__(self, lookup: CellLookup, sheet: str, max_row: Callable[[str], int],
                 functions: dict[str, Function], budget: CellBudget | None = None) -> None:
        self.lookup, self.sheet, self.max_row, self.functions = lookup, sheet, max_row, functions
        self.budget = budget or CellBudget()

    def eval(self, node: Node) -> Any:
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "ref":
            grid = self.ref(node)
            return grid[0][0] if len(grid) == 1 and len(grid[0]) == 1 else grid
        if kind == "neg":
            return arith("-", 0, self.scalar(node[1]))
        if kind == "pct":
            return arith("/", self.scalar(node[1]), 100)
        if kind == "bin":
            return binary(node[1], self.scalar(node[2]), self.scalar(node[3]))
        fn = self.functions.get(node[1])
        if fn is None:
            raise Unsupported(f"function {node[1]} is not supported")
        return fn(self, node[2])

    def scalar(self, node: Node) -> Any:
        value = self.eval(node)
        if isinstance(value, list):  # implicit intersection is not modelled: a range as a scalar
            raise Unsupported("a range used where a single value is expected")
        return value

    def ref(self, node: Node) -> Grid:
        sheet = node[1] or self.sheet
        first, _, last = node[2].partition(":")
        c1, r1 = _split(first, 1)
        c2, r2 = _split(last, self.max_row(sheet)) if last else (c1, r1)
        if not first[-1].isdigit():
            r1 = 1
        self.budget.spend(node[2], (abs(r2 - r1) + 1) * (abs(c2 - c1) + 1))
        return [[self.lookup(sheet, r, c) for c in range(min(c1, c2), max(c1, c2) + 1)]
                for r in range(min(r1, r2), max(r1, r2) + 1)]

    def values(self, args: list[Node]) -> Iterator[tuple[Any, bool]]:
        """Every argument's values, flagged True when they came from a reference (Excel's
        aggregate functions skip text and booleans there but coerce typed-in ones)."""
        for arg in args:
            value = self.eval(arg)
            if isinstance(value, list):
                for row in value:
                    for v in row:
                        yield v, True
            else:
                yield value, arg[0] == "ref"


def _split(a1: str, default_row: int) -> tuple[int, int]:
    m = re.fullmatch(r"([A-Z]{1,3})(\d*)", a1)
    if m is None:
        raise Unsupported(f"bad reference {a1!r}")
    return column_index_from_string(m.group(1)), int(m.group(2)) if m.group(2) else default_row
