/*
 * The scale scenario's latency load: paced phases of <rate> records/s for <seconds>, round robin
 * over every partition of every topic, on Java's producer.
 *
 * Why not librdkafka: at 1,000 partitions and 5,000 records/s a librdkafka producer sends one
 * partition per produce request, 5 requests at a time, so it needs about one request per record
 * and its own queue becomes most of every system's measured latency (docs/performance.md,
 * "The load generator at 1,000 partitions"). Java's producer puts every ready partition of a
 * broker in one request, as the applications a replicator serves mostly do.
 *
 * One process serves every phase of a measurement (the warm-up, then the measured load), so the
 * JVM's start and its first compilations fall before the measured load, not in it. Each line on
 * stdin, "<firstSeq> <rate> <seconds>", runs one phase; stdin's end closes the producer.
 *
 * Record n (n from <firstSeq>) has the key "L%011d", a value of <size> bytes starting with its
 * timestamp (ms, big-endian, the time it was handed to the producer), that timestamp as its
 * own, and the header bench=sparkmirror: the records bench/workload.py's paced producer writes.
 * Record n is due at start + n / rate; a starved loop sends late (the lateness is reported),
 * never early.
 *
 * Usage:
 *   PacedLoad <bootstrap> <topics, comma-separated> <partitionsPerTopic> <size> [<producers>]
 *
 * <producers> (1 by default): that many producers, each partition always written by the same one,
 * each with a connection of its own (a broker answers one request per connection at a time).
 *
 * Stdout carries "ready" once the producer has every topic's metadata, then a line per phase,
 * once every record of it is acknowledged: "sent <n> seconds <s> behind_ms <max>", then pairs of
 * the producer's own metrics (record-queue-time-avg ... batch-size-avg, over its sampled window),
 * "append_ms_p50_p99" (the broker's append time in each answer minus the record's timestamp: on a
 * LogAppendTime topic, the source part as the generator sees it) and "send_us_p50_p99" (the time
 * spent in send() itself). Any failed send
 * exits 1 with the error on stderr.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class PacedLoad {

    private static final byte[] HEADER_VALUE = "sparkmirror".getBytes(StandardCharsets.UTF_8);

    /** What the broker's answers say of each record (its append time on a LogAppendTime topic) and each send()'s own time. */
    private static final java.util.Queue<Long> appendMs = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private static final java.util.Queue<Long> sendUs = new java.util.concurrent.ConcurrentLinkedQueue<>();

    private static String percentiles(java.util.Collection<Long> values) {
        List<Long> sorted = new ArrayList<>(values);
        if (sorted.isEmpty()) {
            return "-";
        }
        java.util.Collections.sort(sorted);
        return sorted.get(sorted.size() / 2) + "/" + sorted.get((int) (sorted.size() * 0.99));
    }

    /** The producer's own view of where a record waited: in its accumulator, or for the broker's answer. */
    private static String producerMetrics(KafkaProducer<byte[], byte[]> producer) {
        StringBuilder out = new StringBuilder();
        for (String name : new String[] {"record-queue-time-avg", "record-queue-time-max", "request-latency-avg",
                "request-latency-max", "records-per-request-avg", "batch-size-avg"}) {
            for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
                if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                    out.append(String.format(" %s %.1f", name, ((Number) e.getValue().metricValue()).doubleValue()));
                }
            }
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4 && args.length != 5) {
            System.err.println("usage: PacedLoad <bootstrap> <topics> <partitionsPerTopic> <size> [<producers>]");
            System.exit(2);
        }
        String[] topics = args[1].split(",");
        int partitions = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        int count = args.length == 5 ? Integer.parseInt(args[4]) : 1;
        List<String> targetTopics = new ArrayList<>();
        List<Integer> targetPartitions = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            for (String topic : topics) {
                targetTopics.add(topic);
                targetPartitions.add(p);
            }
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicLong failed = new AtomicLong();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        List<KafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
        try {
            for (int n = 0; n < count; n++) {
                producers.add(new KafkaProducer<>(props));
            }
            // Metadata of every topic before any phase: the first send of a topic waits for it.
            for (KafkaProducer<byte[], byte[]> producer : producers) {
                for (String topic : topics) {
                    producer.partitionsFor(topic);
                }
            }
            System.out.println("ready");
            System.out.flush();
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String[] phase = line.trim().split("\\s+");
                long firstSeq = Long.parseLong(phase[0]);
                double rate = Double.parseDouble(phase[1]);
                long total = (long) (rate * Double.parseDouble(phase[2]));
                long sent = 0;
                double maxBehindMs = 0;
                appendMs.clear();
                sendUs.clear();
                long start = System.nanoTime();
                while (sent < total) {
                    double elapsed = (System.nanoTime() - start) / 1e9;
                    long due = Math.min(total, (long) (elapsed * rate) + 1);
                    if (due > sent) {
                        maxBehindMs = Math.max(maxBehindMs, (elapsed - sent / rate) * 1000);
                    }
                    for (; sent < due; sent++) {
                        int i = (int) (sent % targetTopics.size());
                        long ts = System.currentTimeMillis();
                        ByteBuffer value = ByteBuffer.allocate(Math.max(size, 8));
                        value.putLong(ts);
                        RecordHeaders headers = new RecordHeaders();
                        headers.add("bench", HEADER_VALUE);
                        byte[] key = String.format("L%011d", firstSeq + sent).getBytes(StandardCharsets.US_ASCII);
                        long before = System.nanoTime();
                        producers.get(i % count).send(
                            new ProducerRecord<>(targetTopics.get(i), targetPartitions.get(i), ts, key, value.array(),
                                headers),
                            (metadata, error) -> {
                                if (error != null) {
                                    failed.incrementAndGet();
                                    failure.compareAndSet(null, error);
                                } else {
                                    appendMs.add(metadata.timestamp() - ts);
                                }
                            });
                        sendUs.add((System.nanoTime() - before) / 1000);
                    }
                    Thread.sleep(1);
                }
                for (KafkaProducer<byte[], byte[]> producer : producers) {
                    producer.flush();
                }
                if (failure.get() != null) {
                    System.err.println("offering load: " + failed.get() + " records failed, first: " + failure.get());
                    System.exit(1);
                }
                System.out.printf("sent %d seconds %.3f behind_ms %.1f%s append_ms_p50_p99 %s send_us_p50_p99 %s%n",
                    sent, (System.nanoTime() - start) / 1e9, maxBehindMs, producerMetrics(producers.get(0)),
                    percentiles(appendMs), percentiles(sendUs));
                System.out.flush();
            }
        } finally {
            for (KafkaProducer<byte[], byte[]> producer : producers) {
                producer.close();
            }
        }
    }
}
