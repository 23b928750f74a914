"""Flow control of running flows (pause, resume, throttle) through their target cluster."""
