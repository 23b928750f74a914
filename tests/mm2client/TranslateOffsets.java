/*
 * Test harness: asks Kafka's own MM2 client library (connect-mirror-client) what it reads
 * from a cluster, so the tests can compare it with what sparkmirror wrote there.
 *
 * Usage:
 *   TranslateOffsets <bootstrap> <remoteClusterAlias> <group> [timeoutMs]
 *       RemoteClusterUtils.translateOffsets; prints "topic<TAB>partition<TAB>offset" per
 *       partition, sorted by topic, then partition.
 *   TranslateOffsets heartbeatTopics|checkpointTopics|upstreamClusters <bootstrap>
 *       prints one name per line, sorted.
 *   TranslateOffsets replicationHops <bootstrap> <upstreamClusterAlias>
 *       prints the hop count (-1 when unreachable).
 *
 * Only bootstrap.servers is configured, as a plain application would. Exit status: 0 done,
 * 2 usage, 1 the client failed (its stack trace on stderr). Stdout carries nothing else.
 */

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public final class TranslateOffsets {

    private static final Set<String> NAME_MODES = Set.of("heartbeatTopics", "checkpointTopics", "upstreamClusters");

    private TranslateOffsets() {
    }

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static int run(String[] args) throws Exception {
        if (args.length >= 1 && NAME_MODES.contains(args[0])) {
            if (args.length != 2) {
                return usage();
            }
            Map<String, Object> props = clientProps(args[1]);
            Set<String> names;
            switch (args[0]) {
                case "heartbeatTopics":
                    names = RemoteClusterUtils.heartbeatTopics(props);
                    break;
                case "checkpointTopics":
                    names = RemoteClusterUtils.checkpointTopics(props);
                    break;
                default:
                    names = RemoteClusterUtils.upstreamClusters(props);
                    break;
            }
            new TreeSet<>(names).forEach(System.out::println);
            return 0;
        }
        if (args.length >= 1 && args[0].equals("replicationHops")) {
            if (args.length != 3) {
                return usage();
            }
            System.out.println(RemoteClusterUtils.replicationHops(clientProps(args[1]), args[2]));
            return 0;
        }
        if (args.length != 3 && args.length != 4) {
            return usage();
        }
        Duration timeout = Duration.ofMillis(args.length == 4 ? Long.parseLong(args[3]) : 30_000L);
        Map<TopicPartition, OffsetAndMetadata> offsets =
            RemoteClusterUtils.translateOffsets(clientProps(args[0]), args[1], args[2], timeout);
        List<TopicPartition> partitions = new ArrayList<>(offsets.keySet());
        partitions.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        StringBuilder out = new StringBuilder();
        for (TopicPartition tp : partitions) {
            out.append(tp.topic()).append('\t').append(tp.partition()).append('\t')
                .append(offsets.get(tp).offset()).append('\n');
        }
        System.out.print(out);
        return 0;
    }

    private static Map<String, Object> clientProps(String bootstrap) {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        return props;
    }

    private static int usage() {
        System.err.println("usage: TranslateOffsets <bootstrap> <remoteClusterAlias> <group> [timeoutMs]\n"
            + "       TranslateOffsets heartbeatTopics|checkpointTopics|upstreamClusters <bootstrap>\n"
            + "       TranslateOffsets replicationHops <bootstrap> <upstreamClusterAlias>");
        return 2;
    }
}
