"""Worksheet functions for the formula evaluator (see xlformula.py for why we evaluate ourselves):
the common aggregates, rounding, logic, text and the conditional sums."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable
from decimal import ROUND_DOWN, ROUND_HALF_UP, ROUND_UP, Decimal
from typing import Any

from deskbench.corpus.xlformula import Evaluator, Function, Node
from deskbench.corpus.xlvalues import DIV0, VALUE, ExcelError, compare, text_of, to_number


def _numbers(ev: Evaluator, args: list[Node]) -> list[float | int] | ExcelError:
    """Numeric arguments as Excel's SUM sees them: referenced text/booleans/blanks are skipped,
    typed-in ones coerced; the first error wins."""
    out: list[float | int] = []
    for value, from_ref in ev.values(args):
        if isinstance(value, ExcelError):
            return value
        if from_ref and (value is None or isinstance(value, bool | str)):
            continue
        number = to_number(value)
        if isinstance(number, ExcelError):
            return number
        out.append(number)
    return out


def _aggregate(reduce: Callable[[list[float | int]], Any]) -> Function:
    def fn(ev: Evaluator, args: list[Node]) -> Any:
        nums = _numbers(ev, args)
        return nums if isinstance(nums, ExcelError) else reduce(nums)
    return fn


def _average(nums: list[float | int]) -> Any:
    return sum(nums) / len(nums) if nums else DIV0


def _round(mode: str) -> Function:
    """ROUND rounds half away from zero (Excel), not to even (Python)."""
    def fn(ev: Evaluator, args: list[Node]) -> Any:
        x = to_number(ev.scalar(args[0]))
        digits = to_number(ev.scalar(args[1])) if len(args) > 1 else 0
        if isinstance(x, ExcelError):
            return x
        if isinstance(digits, ExcelError):
            return digits
        quantum = Decimal(1).scaleb(-int(digits))
        rounded = Decimal(repr(x)).quantize(quantum, rounding=mode) if int(digits) >= 0 else (
            (Decimal(repr(x)) / quantum).quantize(Decimal(1), rounding=mode) * quantum)
        result = float(rounded)
        return int(result) if result.is_integer() else result
    return fn


def _if(ev: Evaluator, args: list[Node]) -> Any:
    cond = ev.scalar(args[0])
    if isinstance(cond, ExcelError):
        return cond
    truth = _truth(cond)
    if isinstance(truth, ExcelError):
        return truth
    if truth:
        return ev.eval(args[1]) if len(args) > 1 else True
    return ev.eval(args[2]) if len(args) > 2 else False


def _truth(value: Any) -> bool | ExcelError:
    if isinstance(value, str):
        if value.upper() in ("TRUE", "FALSE"):
            return value.upper() == "TRUE"
        return VALUE
    number = to_number(value)
    return number if isinstance(number, ExcelError) else number != 0


def _iferror(ev: Evaluator, args: list[Node]) -> Any:
    value = ev.eval(args[0])
    return ev.eval(args[1]) if isinstance(value, ExcelError) else value


def _logical(combine: Callable[[Iterable[bool]], bool]) -> Function:
    def fn(ev: Evaluator, args: list[Node]) -> Any:
        truths: list[bool] = []
        for value, from_ref in ev.values(args):
            if from_ref and (value is None or isinstance(value, str)):
                continue
            truth = _truth(value)
            if isinstance(truth, ExcelError):
                return truth
            truths.append(truth)
        return combine(truths) if truths else VALUE
    return fn


def _not(ev: Evaluator, args: list[Node]) -> Any:
    truth = _truth(ev.scalar(args[0]))
    return truth if isinstance(truth, ExcelError) else not truth


def _concat(ev: Evaluator, args: list[Node]) -> Any:
    parts: list[str] = []
    for value, _ in ev.values(args):
        if isinstance(value, ExcelError):
            return value
        parts.append(text_of(value))
    return "".join(parts)


def _counta(ev: Evaluator, args: list[Node]) -> int:
    return sum(1 for v, _ in ev.values(args) if v is not None)


def _count(ev: Evaluator, args: list[Node]) -> int:
    return sum(1 for v, ref in ev.values(args)
               if not isinstance(v, bool | ExcelError) and v is not None
               and not (ref and isinstance(v, str)) and not isinstance(to_number(v), ExcelError))


def _criterion(raw: Any) -> Callable[[Any], bool]:
    """SUMIF/COUNTIF criteria: a value, or text such as ">=10", "<>x", "ab*"."""
    if not isinstance(raw, str):
        return lambda v: v is not None and compare("=", v, raw)
    op = next((o for o in ("<>", ">=", "<=", "=", ">", "<") if raw.startswith(o)), "=")
    operand: Any = raw[len(op):] if raw.startswith(op) else raw
    number = to_number(operand) if operand.strip() else None
    if isinstance(number, int | float):
        return lambda v: isinstance(to_number(v), int | float) and not isinstance(v, str | bool) \
            and v is not None and compare(op, v, number)
    if op in ("=", "<>") and any(c in operand for c in "*?"):
        pattern = operand.casefold()

        def hit(v: Any) -> bool:
            return isinstance(v, str) and fnmatch.fnmatchcase(v.casefold(), pattern)
        return hit if op == "=" else (lambda v: not hit(v))
    if op == "=" and operand == "":
        return lambda v: v is None or v == ""
    return lambda v: compare(op, "" if v is None else v, operand)


def _flat(ev: Evaluator, node: Node) -> list[Any]:
    value = ev.eval(node)
    return [v for row in value for v in row] if isinstance(value, list) else [value]


def _conditional(kind: str) -> Function:
    def fn(ev: Evaluator, args: list[Node]) -> Any:
        test = _flat(ev, args[0])
        keep = _criterion(ev.scalar(args[1]))
        if kind == "count":
            return sum(1 for v in test if keep(v))
        target = _flat(ev, args[2]) if len(args) > 2 else test
        picked = [t for v, t in zip(test, target, strict=False) if keep(v)]
        errors = [t for t in picked if isinstance(t, ExcelError)]
        if errors:
            return errors[0]
        nums = [t for t in picked if isinstance(t, int | float) and not isinstance(t, bool)]
        return sum(nums) if kind == "sum" else _average(nums)
    return fn


def _sumproduct(ev: Evaluator, args: list[Node]) -> Any:
    arrays = [_flat(ev, a) for a in args]
    if len({len(a) for a in arrays}) != 1:
        return VALUE
    total: float = 0
    for items in zip(*arrays, strict=True):
        product: float = 1
        for v in items:
            if isinstance(v, ExcelError):
                return v
            product *= v if isinstance(v, int | float) and not isinstance(v, bool) else 0
        total += product
    return int(total) if float(total).is_integer() else total


def _unary(op: Callable[[float], Any]) -> Function:
    def fn(ev: Evaluator, args: list[Node]) -> Any:
        x = to_number(ev.scalar(args[0]))
        if isinstance(x, ExcelError):
            return x
        try:
            return op(x)
        except (ValueError, ZeroDivisionError, OverflowError):
            return ExcelError("#NUM!")
    return fn


def _mod(ev: Evaluator, args: list[Node]) -> Any:
    x, y = (to_number(ev.scalar(a)) for a in args[:2])
    if isinstance(x, ExcelError):
        return x
    if isinstance(y, ExcelError):
        return y
    return DIV0 if y == 0 else x - y * math.floor(x / y)


FUNCTIONS: dict[str, Function] = {
    "SUM": _aggregate(sum),
    "AVERAGE": _aggregate(_average),
    "MIN": _aggregate(lambda n: min(n) if n else 0),
    "MAX": _aggregate(lambda n: max(n) if n else 0),
    "PRODUCT": _aggregate(lambda n: math.prod(n) if n else 0),
    "COUNT": _count,
    "COUNTA": _counta,
    "ROUND": _round(ROUND_HALF_UP),
    "ROUNDUP": _round(ROUND_UP),
    "ROUNDDOWN": _round(ROUND_DOWN),
    "INT": _unary(lambda x: math.floor(x)),
    "ABS": _unary(abs),
    "SQRT": _unary(math.sqrt),
    "MOD": _mod,
    "IF": _if,
    "IFERROR": _iferror,
    "AND": _logical(all),
    "OR": _logical(any),
    "NOT": _not,
    "CONCATENATE": _concat,
    "CONCAT": _concat,
    "LEN": lambda ev, a: len(text_of(ev.scalar(a[0]))),
    "UPPER": lambda ev, a: text_of(ev.scalar(a[0])).upper(),
    "LOWER": lambda ev, a: text_of(ev.scalar(a[0])).lower(),
    "TRIM": lambda ev, a: " ".join(text_of(ev.scalar(a[0])).split()),
    "SUMIF": _conditional("sum"),
    "COUNTIF": _conditional("count"),
    "AVERAGEIF": _conditional("average"),
    "SUMPRODUCT": _sumproduct,
}
