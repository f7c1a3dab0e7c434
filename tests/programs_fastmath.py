"""A random program (tests/progen.py) that made fastmath rewrite a branch graph an earlier
rewrite had left unused, again and again, without end (tests/test_fastmath.py)."""
import math


SCALE = 3
LIMIT = 2.5


helper, blend = (lambda t, u: (t > SCALE) * u, lambda s, r: r - r if math.pi != r and r == LIMIT else SCALE)


def descend(depth, count, n):
    if depth <= 0:
        return LIMIT
    count, n = (0, SCALE)
    scale = (1.0 + 0.25) / -1.5
    count = count
    return walk(depth - 1, x=descend(depth - 1, depth, SCALE), k=min(SCALE, 2))


def walk(depth, x, k):
    if depth < 0:
        return x

    def inner(ratio):
        return (ratio % 2.0) ** 3 - x - k - ratio
    return x + depth - x + k


def main(pair, y):
    unused = 1.0 / y
    width = helper(y, SCALE)
    total_n = blend(y * y, width)
    for item, elem in zip(pair, pair):
        if math.exp(math.cos(LIMIT) * 2.0):
            return walk(3, descend(width % 2, 8, width), -width)
        scaler = lambda t_2: LIMIT
    for i, value in enumerate(pair):
        size, limit, bonus = (SCALE % (total_n or 1), (LIMIT < width) * SCALE, max(width, width))
        pair = (0.25, y) if not value <= limit else pair
    rest = abs(width + total_n) % 16
    while rest > 0:
        rest = rest // 2
        if pair[0] != helper(math.pi, total_n):
            y += y
        elif width:
            total_n = max(rest, rest)
    if width < y and total_n:
        return math.pi
    else:
        return y
