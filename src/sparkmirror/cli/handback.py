"""`sparkmirror handback mm2 mm2.properties`: hand the flows back to MirrorMaker 2 where sparkmirror stopped.

For each flow it writes MM2's committed source offsets (Connect's offsets topic on the target, MM2's
format: :mod:`sparkmirror.core.connect_offsets`) from sparkmirror's progress, so that MM2 started
afterwards on the same file resumes each partition at the first record sparkmirror has not copied
and copies nothing twice. It holds the flow's lease while it writes: a running sparkmirror of the
flow is refused (exit 6, naming it). docs/migrating-from-mm2.md.
"""

from __future__ import annotations

from pathlib import Path

import click

from sparkmirror.cli.flows import flows_option, mm2_offsets_topic_option


@click.group()
def handback() -> None:
    """Hand flows back to another replicator, from where sparkmirror stopped."""


@handback.command("mm2")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@flows_option
@mm2_offsets_topic_option
def mm2(config: Path, flows: tuple[str, ...], mm2_offsets_topic: str) -> None:
    """Write MirrorMaker 2's committed offsets from sparkmirror's progress (stop sparkmirror first)."""
    from sparkmirror.cli.flows import chosen_flows
    from sparkmirror.config import load_config
    from sparkmirror.core.adoption import HANDED_BACK, own_next
    from sparkmirror.core.connect_offsets import offsets_topic
    from sparkmirror.kafka.factory import new_producer
    from sparkmirror.kafka.flowclients import FlowClients
    from sparkmirror.kafka.groups import commit_positions, committed_offsets
    from sparkmirror.kafka.internal import COMPACTED, ensure_topic, produce_durably
    from sparkmirror.kafka.mm2offsets import CONNECT_OFFSETS_PARTITIONS, handback_records, mm2_positions
    from sparkmirror.kafka.topics import TopicSync
    from sparkmirror.offsets.store import OffsetMapStore
    from sparkmirror.pipeline.driver.flow import take_lease, write_plan

    for flow in chosen_flows(load_config(config), config, flows):
        clients = FlowClients(flow)
        topic = offsets_topic(flow.source, mm2_offsets_topic.strip() or flow.mm2_offsets_topic)
        lease = take_lease(clients)  # refuses while a sparkmirror instance runs the flow
        try:
            sync = TopicSync(clients)
            sources = sync.source_topics()
            plan = write_plan(clients)
            remote = {t: sync.remote_name(t) for t in sources}
            progress = committed_offsets(
                plan.consumer_config,
                plan.progress_group,
                [(remote[t], p) for t, n in sources.items() for p in range(n)],
            )
            store = OffsetMapStore(clients)
            store.load()
            tails = store.tails()
            positions = {
                (t, p): at
                for t, n in sources.items()
                for p in range(n)
                if (at := own_next(progress.get((remote[t], p)), tails.get((t, p)))) is not None
            }
            records = handback_records(
                positions, flow.source, mm2_positions(clients.target_consumer, topic, flow.source)
            )
            if records:
                ensure_topic(
                    clients.target_admin,
                    topic,
                    partitions=CONNECT_OFFSETS_PARTITIONS,
                    config=COMPACTED,
                    purpose="Kafka Connect's offsets topic of MirrorMaker 2",
                )
                # Connect's producer puts a key where Java's default partitioner does; MM2 reads the last
                # record of a key, so the key must land in the partition of the ones before it.
                producer = new_producer({**clients.internal_producer, "partitioner": "murmur2_random"})
                produce_durably(producer, topic, records, what="MirrorMaker 2's source offsets")
                # Marked on sparkmirror's progress: taking over again adopts what MM2 copies from here on.
                commit_positions(
                    plan.consumer_config,
                    plan.progress_group,
                    {(remote[t], p): (o, HANDED_BACK) for (t, p), o in positions.items() if o > 0},
                )
            shown = ", ".join(f"{t}[{p}] at {o}" for (t, p), o in sorted(positions.items()) if o > 0)
            click.echo(
                f"flow={flow.name}: MirrorMaker 2 resumes {len(records)} partitions from {topic} on {flow.target}"
                + (f": {shown}" if shown else " (sparkmirror copied nothing yet)")
            )
        finally:
            lease.release()
    click.echo("Start MirrorMaker 2 with the same file; do not start sparkmirror for these flows meanwhile.")
