"""Reads a stamps CSV of bench_attention (B12X_ATTN_BENCH_STAMPS, written into $B12X_BENCH_OUT)
and prints the K/V landing rate over time (each CTA's first tile at its landing stamp, which for
early-K/V CTAs was read before the release; the others spread evenly up to its last tile), each
SM's end and rate, and each split's median end (session 28,
docs/attention.md).

    python3 bench/attention_stamps_timeline.py stamps-<label>.csv [tile bytes, default 32768]
"""

import collections
import csv
import sys


def main(path, tile_bytes):
    ctas = []
    for r in csv.DictReader(open(path)):
        if r["kind"] == "main":
            ctas.append((int(r["sm"]), int(r["split"]), int(r["tiles"]), int(r["g4"]),
                         int(r["g5"])))
    print(f"{len(ctas)} main CTAs; GB/s landed in each 1-us bin after the first wait release")
    bins = collections.Counter()
    for _, _, n, first, last in ctas:
        if n <= 0:
            continue
        bins[first // 1000] += tile_bytes
        if n > 1 and last > first:
            per_ns = (n - 1) * tile_bytes / (last - first)
            for t in range(first, last, 100):
                bins[t // 1000] += per_ns * min(100, last - t)
    for b in range(min(bins), max(bins) + 1):
        print(f"{b:5d} us {bins[b] / 1000:7.0f}")
    by_sm = collections.defaultdict(list)
    for c in ctas:
        by_sm[c[0]].append(c)
    print("sm:CTAs last-tile-us GB/s")
    cells = []
    for sm in sorted(by_sm):
        cs = by_sm[sm]
        rate = sum((n - 1) * tile_bytes / max(1, last - first) for _, _, n, first, last in cs
                   if n > 1)
        cells.append(f"{sm:3d}:{len(cs)} {max(c[4] for c in cs) / 1000:5.1f} {rate:5.1f}")
    for i in range(0, len(cells), 6):
        print("  ".join(cells[i:i + 6]))
    by_split = collections.defaultdict(list)
    for c in ctas:
        by_split[c[1]].append(c[4] / 1000)
    print("split: median last tile (us) " +
          " ".join(f"{s}:{sorted(v)[len(v) // 2]:.1f}" for s, v in sorted(by_split.items())))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 32768)
