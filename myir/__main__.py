"""`python -m myir demo`: compile and run a few functions, and show what the compiler made."""

import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["demo"]:
        print("usage: python -m myir demo", file=sys.stderr)
        return 2
    from myir.demo import main as demo

    return demo(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
