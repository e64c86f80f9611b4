"""Summarise a py-spy raw (collapsed stacks) profile: where the samples went.

    python -m bench.profile_summary PROFILE.txt [--top 30] [--match jobdash/]

Prints the functions with the most inclusive samples (the function or anything it calls)
and the most self samples, as shares of all samples. bench.kueue_baseline --profile DIR
writes such profiles of the dispatcher and kubesim processes.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def load(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if frames and count.isdigit():
            stacks.append((frames.split(";"), int(count)))
    return stacks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default="", help="only frames whose text contains this")
    args = parser.parse_args()
    stacks = load(args.profile)
    total = sum(count for _, count in stacks) or 1
    inclusive, own = Counter(), Counter()
    for frames, count in stacks:
        for frame in set(frames):
            if args.match in frame:
                inclusive[frame] += count
        if args.match in frames[-1]:
            own[frames[-1]] += count
    print(f"{total} samples")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"\n-- {title}")
        for frame, count in counter.most_common(args.top):
            print(f"{100 * count / total:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
