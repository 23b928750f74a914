"""Entry point: parse, configure logging once, dispatch, map errors to exit codes.

Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error; failover and
failback add 3 (a group is active on the destination) and 4 (replication has not caught up);
run adds 5 (records expired on the source before they were mirrored), 6 (another instance
runs the flow: it holds the flow's lease) and 7 (a source topic was deleted and re-created);
status adds 8 (a partition lags beyond the limit given) and 9 (a flow failed, went silent or
never reported); pause, resume and throttle exit 1 when the target refuses the caller.
docs/faults.md lists run's codes with the faults behind them, and which one a
run whose flows stopped with different codes exits with.
Heavy imports (pyspark, confluent-kafka) happen inside the commands.
"""

from __future__ import annotations

import logging
import os
import sys

import click

from sparkmirror.errors import SparkMirrorError
from sparkmirror.logs import FORMAT

log = logging.getLogger("sparkmirror")


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except SparkMirrorError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:
            # Kafka client and Spark (Py4J) errors: one clear line, exit 1.
            kind = type(exc).__name__
            if kind not in (
                "KafkaException",
                "Py4JJavaError",
                "Py4JError",
                "PySparkException",
            ) and not kind.endswith("Exception"):
                raise
            first = next((line for line in str(exc).splitlines() if line.strip()), kind)
            click.echo(f"error: {kind}: {first.strip()[:500]}", err=True)
            ctx.exit(1)


def _setup_logging(verbose: int) -> None:
    """Our lines at INFO (DEBUG with -vv); librdkafka's and Spark's only when they matter.

    librdkafka's lines (through :mod:`sparkmirror.kafka.factory`) show from WARNING, from INFO with
    ``-v``; Spark's log4j from ERROR, from WARN with ``-v`` and INFO with ``-vv``.
    """
    level = logging.DEBUG if verbose > 1 else logging.INFO
    logging.basicConfig(level=level, format=FORMAT, stream=sys.stderr)
    librdkafka = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.getLogger("sparkmirror.kafka.librdkafka").setLevel(librdkafka)
    logging.getLogger("py4j").setLevel(logging.DEBUG if verbose > 2 else logging.WARNING)  # a line per call
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        # Never a call's arguments: the writers' plans (pickled) hold client secrets.
        logging.getLogger(name).addFilter(_without_py4j_payloads)
    os.environ.setdefault("SPARKMIRROR_SPARK_LOG_LEVEL", ("ERROR", "WARN", "INFO")[min(verbose, 2)])


def _without_py4j_payloads(record: logging.LogRecord) -> bool:
    """Drops py4j's debug lines that print a call's command or answer (arguments included)."""
    return not str(record.msg).startswith(("Command to send", "Answer received"))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def cli(verbose: int) -> None:
    """sparkmirror: mirror Kafka topics between clusters on Apache Spark."""
    _setup_logging(verbose)


def _register() -> None:
    from sparkmirror.cli import control, demo, dev, failover, handback, offsets, run, setup, status

    cli.add_command(setup.setup)
    cli.add_command(dev.dev)
    cli.add_command(run.run)
    cli.add_command(demo.demo)
    cli.add_command(offsets.offsets)
    cli.add_command(failover.failover)
    cli.add_command(failover.failback)
    cli.add_command(status.status)
    cli.add_command(handback.handback)
    cli.add_command(control.pause)
    cli.add_command(control.resume)
    cli.add_command(control.throttle)


_register()


def main() -> None:
    cli(prog_name="sparkmirror")


if __name__ == "__main__":
    main()
