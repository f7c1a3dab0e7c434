"""Subjects for tests/test_loops.py: loops that were miscompiled, failed to differentiate or
failed to compile, kept as they were found.  They live in a real file because myir reads
source with `inspect.getsource`, and the traceback tests read line numbers of this file."""

import math

from myir import grad


# The thorough random-program profile's loop: a copy of the `while` loop is emitted inside a
# branch of the enclosing `for` loop, and its exit must leave that loop too.

def apply(fn, flag, count=1):
    speed = min(1.0, 1.0) * descend(4, y=0.25, x=math.pi)
    return fn((count % speed if speed else speed) + 12 % 4.0)
def descend(depth, x, y):
    if depth <= 1:
            return abs(0.5) if not y else math.sqrt(abs(2.5))
    return descend(depth - 1, y ** 2.0, depth // y if y else y)
def main(pair, scale, ready):
    for elem, value in zip((-3 if ready else pair[-1], 6 // (abs(3) + 1), 10 if 0 == 0 else 5 // 0), pair):
        tries = 0
        while tries < 5:
            tries += 1
            scale = scale
            if ready or apply(lambda t: -4.0 <= 11, ready):
                k = descend(0, scale, scale) and tries * tries
                continue
    return scale < 1.0 and ready


# Higher derivatives through `for ... in range(n)`.

def sin_loop(x, n):
    r = x
    for i in range(n):
        r = math.sin(r)
    return r


def d_sin_loop(x, n):
    return grad(sin_loop)(x, n)


def dd_sin_loop(x, n):
    return grad(grad(sin_loop))(x, n)


def ddd_sin_loop(x, n):
    return grad(grad(grad(sin_loop)))(x, n)


# A loop body calling a closure that captures a variable of the function.

def closure_in_loop(x, n):
    def step(t):
        return t * x
    r = 1.0
    for i in range(n):
        r = step(r)
    return r


def closure_in_while(x, n):
    def step(t):
        return math.sin(t) + x
    r = x
    i = 0
    while i < n:
        r = step(r) * x
        i += 1
    return r


def d_closure_in_loop(x, n):
    return grad(closure_in_loop)(x, n)


def dd_closure_in_while(x, n):
    return grad(grad(closure_in_while))(x, n)


# `return` from loops whose trip count is a parameter, one and two deep.

def return_in_loop(y, n):
    for i in range(n):
        if y * i > 1.0:
            return y * y * i
    return y


def return_before_assignment(y, n):
    for i in range(n):
        if y > 1.0:
            return y * 2.0
        z = y * 3.0
    return z


def return_in_nested_loops(y, n):
    total = y
    for i in range(n):
        for item in (1.0, 2.0):
            total = total * item + y
            if total > 6.0:
                return total * y
    return -total


def return_in_nested_whiles(y, n):
    i = 0
    total = y
    while i < n:
        i += 1
        j = 0
        while j < i:
            j += 1
            total = math.sin(total) * y + j
            if total > 3.0:
                return total
    return total * 2.0


# Errors raised inside loops: the traceback names the offending line of this file.

def sqrt_in_loop(x, n):
    total = 0.0
    for i in range(n):
        total = total + math.sqrt(x - i)
    return total


def divides_in_while(x, n):
    i = 0
    while i < n:
        i += 1
        x = x + 1.0 / (n - i)
    return x


def assigned_in_the_loop_only(x, n):
    for i in range(n):
        y = x * i
    return y


def unpacks_a_list_of_the_loops_length(x, n):
    xs = []
    for i in range(n):
        xs.append(x * i)
    a, b = xs
    return a * b


def comprehension_over_a_float(x):
    return sum([a * a for a in x])


# Deep loops (10^5 iterations) that ran as recursion.  A `while True` loop ending in
# `if ...: break` whose counter nothing reads: the counter's update, kept for the check it
# makes, took the loop's next iteration out of tail position, and its gradient recursed.

def break_at_end_unread_counter(x, limit):
    r = x
    steps = 0
    while True:
        r = r * 1.00001 + 1e-6 * x
        steps += 1
        if r > limit:
            break
    return r


# A loop variable unbound before the loop: inference types the first iteration apart, the
# optimizer inlines it, and the loop is called from two places (both branches of the first
# iteration's `if`), even without a gradient.

def continue_reading_the_target(x, n):
    r = x
    for i in range(n):
        if i % 3 == 0:
            continue
        r = r + 1e-6 * math.cos(r)
    return r


# `for ... else` and `while ... else`: the `else` runs when the loop ends without `break`,
# and its `break`, `continue` and `return` are the enclosing loop's and function's.

def for_else(x, xs):
    r = x
    for a in xs:
        if a > 2.0:
            r = r * a
            break
        r = r + a * x
    else:
        r = r * 10.0
    return r


def while_else_in_for(x, n):
    total = 0.0
    for i in range(n):
        j = 0
        while j < 3:
            if x * i * j > 1.0:
                break
            j += 1
        else:
            total += x
            continue
        total += x * x * j
        if total > 5.0:
            break
    else:
        return -total
    return total


# Closures made in a loop that take the loop's variables as defaults (`lambda t, i=i: ...`,
# Python's idiom for capturing a value), called later as values with the default left out:
# the call was typed as raising (the closure takes two arguments, the call passes one), the
# gradient's backward loop went as dead code and the derivative through the calls was lost;
# the `def` came after the `append` that reads it.

def default_is_the_target(x, n):
    fs = []
    for i in range(n):
        fs.append(lambda t, i=i: t * i)
    r = x
    for f in fs:
        r = f(r) + x
    return r


def default_computed_from_x(x, n):
    fs = []
    for i in range(n):
        fs.append(lambda t, c=x * i: t * c + 1.0)
    r = x
    for f in fs:
        r = f(r) + f(r, 0.5)
    return r
