"""Scheduled runs: the site file's [schedule] as OS timers (systemd user timers or crontab
entries), the wait for a run still going, and the [hooks] run after each run.

spec.py is pure (parsing, next run, the OnCalendar and cron forms); systemd.py, crontab.py,
wait.py and hooks.py are the edges that touch the system.
"""
