"""The scheduler configuration (``volcano-scheduler.conf``) and the rules plugin arguments are
read by."""
