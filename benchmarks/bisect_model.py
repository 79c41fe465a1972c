"""canary bisect's search on simulated measurements (a model, not real runs: benchmarks/bisect_runs.py has those):
N = 16 commits, one +15 % change at a random commit, every pair's effect drawn from a normal error of SD `sd`
around the truth with the usual 95 % interval. How often the commit is named, a wrong one claimed, the budget
exceeded.

    python benchmarks/bisect_model.py [--runs 1500] [--sd 1 2 3 5]
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Sequence

from canary_action.bisect.search import Effect, bisect


def simulate(sd: float, runs: int, n: int = 16, size: float = 15.0, seed: int = 0) -> dict[str, float]:
    rng = random.Random(seed)
    named = wrong = over = 0
    for _ in range(runs):
        at = rng.randint(1, n)

        def measure(index: int, at: int = at) -> Effect:
            centre = rng.gauss(size if index >= at else 0.0, sd)
            return Effect(centre, centre - 1.96 * sd, centre + 1.96 * sd)

        search = bisect(n, measure(n), measure)
        clear = [f.high for f in search.findings if f.clear]
        wrong += any(high != at for high in clear)
        named += clear == [at] and len(search.findings) == 1
        over += 1 + search.spent > math.log2(n) + 2
    return {"named": named / runs, "wrong": wrong / runs, "over_budget": over / runs}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--sd", type=float, nargs="+", default=[1.0, 2.0, 3.0, 5.0])
    args = parser.parse_args(argv)
    print("| SD of a pair's effect | named | wrong commit claimed | over log2 N + 2 pairs |\n|---|---|---|---|")
    for sd in args.sd:
        got = simulate(sd, args.runs, seed=int(sd * 100))
        print(f"| {sd:g} % | {got['named']:.1%} | {got['wrong']:.2%} | {got['over_budget']:.2%} |")


if __name__ == "__main__":
    main()
