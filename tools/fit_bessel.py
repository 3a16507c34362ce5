"""Makes the Chebyshev series of `naiad.codegen.mathlib.bessel_jy` (a development tool: it needs
mpmath, which Naiad does not).  Prints the module's coefficient tables.

    python tools/fit_bessel.py

Each series is the interpolant at 64 Chebyshev nodes of ``u`` in [-1, 1] (interior points: x = 0
is never evaluated), computed with mpmath at 200 bits and cut where its coefficients fall under
1e-18 of the largest:

- below 8, in ``u = x*x/32 - 1``: J0(x); J1(x)/x; the regular parts R0 = Y0 - (2/pi) log(x/2) J0
  and R1/x, R1 = Y1 - (2/pi) (log(x/2) J1 - 1/x);
- from 8 on, in ``u = 2 t*t - 1``, ``t = 8/x``: Hankel's P0, Q0/t, P1, Q1/t, defined by
  ``J_n = sqrt(2/(pi x)) (P_n cos c - Q_n sin c)`` and ``Y_n = sqrt(2/(pi x)) (P_n sin c + Q_n
  cos c)`` with ``c = x - (2n + 1) pi/4``.
"""

from __future__ import annotations

import mpmath

mpmath.mp.prec = 200
NODES = 64


def series(f):
    """Chebyshev coefficients (T_0 first) of f on [-1, 1], cut."""
    us = [mpmath.cos(mpmath.pi * (k + mpmath.mpf(1) / 2) / NODES) for k in range(NODES)]
    values = [f(u) for u in us]
    coefficients = []
    for j in range(NODES):
        c = 2 * sum(v * mpmath.cos(j * mpmath.acos(u)) for u, v in zip(us, values)) / NODES
        coefficients.append(c / 2 if j == 0 else c)
    largest = max(abs(c) for c in coefficients)
    while abs(coefficients[-1]) < largest * mpmath.mpf(10) ** -18:
        coefficients.pop()
    return [float(c) for c in coefficients]


def small_x(u):
    return mpmath.sqrt(32 * (u + 1))


def large_x(u):
    return 8 / mpmath.sqrt((u + 1) / 2)


def hankel(order, u):
    x = large_x(u)
    c = x - (2 * order + 1) * mpmath.pi / 4
    scale = mpmath.sqrt(mpmath.pi * x / 2)
    j, y = mpmath.besselj(order, x), mpmath.bessely(order, x)
    return scale * (j * mpmath.cos(c) + y * mpmath.sin(c)), scale * (-j * mpmath.sin(c) + y * mpmath.cos(c))


def regular(order, x):
    log = mpmath.log(x / 2)
    if order == 0:
        return mpmath.bessely(0, x) - 2 / mpmath.pi * log * mpmath.besselj(0, x)
    return mpmath.bessely(1, x) - 2 / mpmath.pi * (log * mpmath.besselj(1, x) - 1 / x)


TABLES = {
    "_J0_SMALL": lambda u: mpmath.besselj(0, small_x(u)),
    "_J1_SMALL": lambda u: mpmath.besselj(1, small_x(u)) / small_x(u),
    "_R0_SMALL": lambda u: regular(0, small_x(u)),
    "_R1_SMALL": lambda u: regular(1, small_x(u)) / small_x(u),
    "_P0": lambda u: hankel(0, u)[0],
    "_Q0": lambda u: hankel(0, u)[1] / (8 / large_x(u)),
    "_P1": lambda u: hankel(1, u)[0],
    "_Q1": lambda u: hankel(1, u)[1] / (8 / large_x(u)),
}

if __name__ == "__main__":
    for name, f in TABLES.items():
        values = series(f)
        print(f"{name} = (")
        for i in range(0, len(values), 3):
            print("    " + " ".join(f"{v!r}," for v in values[i:i + 3]))
        print(")")
