"""``python -m tests.harness.nemesis --seed N --duration S [--target ours|kafka]``: run a seeded schedule, print the
summary, exit 0 on PASS and 1 on FAIL (2 if the cluster could not be set up)."""
from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from typing import List, Optional

from tests.harness.nemesis.audit import audit, format_summary
from tests.harness.nemesis.runner import Nemesis, remove_workdir
from tests.harness.nemesis.schedule import KINDS, make_schedule


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.harness.nemesis", description=__doc__)
    ap.add_argument("--seed", type=int, default=None, help="schedule seed (random, and printed, if absent)")
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of faults (no fault starts after)")
    ap.add_argument("--target", choices=("ours", "kafka"), default="ours")
    ap.add_argument("--require", default="", help="comma-separated fault kinds to run first, in that order")
    ap.add_argument("--kinds", default=",".join(KINDS), help="the kinds to draw from")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--tmpfs-mb", type=int, default=256, help="size of each broker's log-dir tmpfs")
    ap.add_argument("--inflight", type=int, default=1, help="producer max.in.flight.requests.per.connection")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (broker logs) after a PASS")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    require = [k for k in args.require.split(",") if k]
    kinds = [k for k in args.kinds.split(",") if k]
    schedule = make_schedule(random.Random(seed), int(args.duration) + 10, require, kinds)
    started = time.monotonic()

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    n = Nemesis(args.target, partitions=args.partitions, tmpfs_mb=args.tmpfs_mb, inflight=args.inflight,
                log=lambda s: print(s, flush=True))
    print(f"nemesis: seed {seed}, target {args.target}, {args.duration:.0f}s of faults", flush=True)
    try:
        n.start()
    except Exception as exc:
        print(f"nemesis: could not set the cluster up: {exc!r}", file=sys.stderr)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        n.close()
        return 2
    try:
        n.result.seed = str(seed)
        res = n.run(schedule, args.duration)
        aud = audit(n)
    except Exception as exc:  # one clear line; the work dir keeps the logs
        print(f"nemesis: run aborted: {exc!r} (work dir {n.workdir})", file=sys.stderr)
        return 2
    finally:  # a second Ctrl-C / SIGTERM must not interrupt the clean-up
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        n.close()
    print(format_summary(res, aud, (f"wall time {time.monotonic() - started:.0f}s, work dir {n.workdir}",)),
          flush=True)
    if aud.passed and not res.problems and not args.keep:
        remove_workdir(n.workdir)
    return 0 if aud.passed and not res.problems else 1


if __name__ == "__main__":
    sys.exit(main())
