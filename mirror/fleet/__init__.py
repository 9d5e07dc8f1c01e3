"""The fleet: many sites on a schedule, run by `mirror worker` processes on any machine
through one PostgreSQL database and Procrastinate (DISTRIBUTED.md §5.1).

    mirror schedule apply --db DSN   registry: the site files' text, schedule and zone
                                     (fleet/registry.py, fleet/commands.py)
    every tick (a periodic task)     defers each due site's run with lock = queueing
                                     lock = "site:<name>", and hands the runs of workers
                                     that stopped sending heartbeats to another
                                     (fleet/tick.py)
    mirror worker --db DSN --data D  a Procrastinate worker (fleet/worker.py); each job
                                     restores the site's archive from its store, runs
                                     `python -m mirror run --scheduled` as a child process
                                     and fences it by the job's ownership (fleet/job.py,
                                     fleet/child.py)
    mirror ui --db DSN               the fleet page (fleet/status.py)

psycopg and procrastinate come with the fleet extra and are imported only inside the
functions that talk to the database: `mirror` without the extra starts as before, and a
fleet command says what to install (fleet/db.py: require_extra).
"""
