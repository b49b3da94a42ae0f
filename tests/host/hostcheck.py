"""What the Python host tests share: one printed line per check, and an
exit status that says whether any check went wrong."""
import sys

_wrong = 0


def check(cond, what):
    """Prints `what`, marked ok or WRONG; a wrong one fails the test."""
    global _wrong
    print(("ok: " if cond else "WRONG: ") + what)
    if not cond:
        _wrong += 1
    return cond


def finish():
    """Exits 1 if any check went wrong, 0 otherwise."""
    if _wrong:
        print(f"{_wrong} check(s) WRONG")
    sys.exit(1 if _wrong else 0)
