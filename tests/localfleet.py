"""A local test fleet in one command: PostgreSQL (Debian's, initdb into a temporary
folder), an S3 server (moto), a site of 8 loopback hosts, and N `mirror run --db` workers,
each with its own folder, sharing one crawl; then `mirror verify --db`.

    python tests/localfleet.py [--workers 4] [--pages 2000] [--keep]

Needs the test extra (`pip install -e '.[test,fleet]'`) and Debian's postgresql. Each
worker's output is in DIR/wN/wN.out, its log in DIR/wN/archive/mirror.log. With --keep,
the database, the store and the site stay up until Ctrl-C, with the commands to look at
them printed (start more workers, kill one, verify). Everything it starts is stopped by
process id.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from multihost import MultiHost, SharedWorker, site_file  # noqa: E402
from pgserver import create_database, pg_server  # noqa: E402
from s3server import moto_s3  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--delay", type=float, default=0.05, help="[crawl] delay (0.05)")
    parser.add_argument("--dir", type=Path, help="where the workers' folders go "
                                                 "(default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the database, the store and the site up until Ctrl-C")
    args = parser.parse_args(argv)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="mirror-fleet-"))
    with pg_server() as pg, moto_s3() as s3:
        dsn = create_database(pg, "fleet")
        s3.make_bucket("fleet")
        store = "s3://fleet/multi"
        os.environ.update(s3.env)  # the workers' AWS_* variables
        site = MultiHost(folder / "site", args.pages)
        workers = [SharedWorker(f"w{n}", site_file(folder / f"w{n}" / "site.toml",
                                                   site.start_url, site.hosts, store,
                                                   delay=args.delay), dsn)
                   for n in range(1, args.workers + 1)]
        try:
            print(f"database  {dsn}\nstore     {store} (moto at {s3.endpoint})\n"
                  f"site      {site.start_url} and {len(site.hosts) - 1} more hosts\n"
                  f"workers   {folder}/w1 ... w{args.workers}", flush=True)
            began = time.monotonic()
            for w in workers:
                w.start()
            while any(w.running() for w in workers):
                time.sleep(0.2)
            print(f"all {len(workers)} workers exited after "
                  f"{time.monotonic() - began:.1f} s: {[w.exits for w in workers]}")
            verify = subprocess.run([sys.executable, "-m", "mirror", "verify",
                                     str(workers[0].site), "--db", dsn], check=False)
            if args.keep:
                env = " ".join(f"{k}={v}" for k, v in s3.env.items())
                print(f"\nup until Ctrl-C; in another shell:\n  export {env}\n"
                      f"  mirror verify {workers[0].site} --db {dsn}\n"
                      f"  mirror run {workers[0].site} --db {dsn} --worker-id w1 --join")
                try:
                    while True:
                        time.sleep(1)
                except KeyboardInterrupt:
                    pass
            return verify.returncode
        finally:
            for w in workers:
                w.stop()
            site.stop()


if __name__ == "__main__":
    sys.exit(main())
