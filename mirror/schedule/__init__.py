"""Scheduled runs: the site file's [schedule] as OS timers (systemd user timers or crontab
entries), and what they show (`mirror schedule list`, the app). The wait for a run still
going and the [hooks] are the run's (mirror/run/).

spec.py is pure (parsing, next run, the OnCalendar and cron forms); systemd.py and
crontab.py are the edges that touch the system.
"""
