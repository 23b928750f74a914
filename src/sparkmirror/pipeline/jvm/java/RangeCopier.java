/*
 * sparkmirror's JVM writer (sparkmirror.writer = jvm): one micro-batch's copy as a Spark job of the
 * JVM's own, without a Python worker on the data path; at least once, or exactly once in transactions.
 *
 * The driver (sparkmirror/pipeline/jvm/writer.py) hands over the batch's planned ranges, shared out
 * into groups (one task each), and the flow's plan as JSON. Each task reads its ranges with a Java
 * consumer (read_committed, assigned, no group) and writes every record, with its key, value,
 * headers and timestamp, to the same partition of the remote topic. It returns one JSON row per
 * source partition with the same fields as the Python sink's PartitionResult, among them the
 * offset-map segments: every produced record's target offset comes from its own send callback
 * (indexed by its source offset, so the pairing does not depend on the order of the callbacks),
 * and a task returns only when every record is acknowledged.
 *
 * Records the target refuses for good (too large for the remote topic's max.message.bytes, which
 * is checked before sending, an invalid record, a missing ACL, ...) are settled after the rest:
 * with errors.tolerance=none the row carries the refusal (topic, partition, offset, reason) and the
 * driver stops the flow without committing; with errors.tolerance=all the record goes to the
 * dead-letter topic with Kafka Connect's header names. Any other failure fails the task, which
 * Spark retries; the batch is replayed if it keeps failing.
 *
 * Exactly once (the Python writer's commit.py Transactional, with Kafka's Java producer): each range
 * names the transactional id of its transaction group, and a task holds every range of its groups.
 * Per id the task borrows a producer that called initTransactions (fencing any earlier holder of the
 * id and completing its open transaction), then reads the progress group's committed offsets on the
 * target: each partition's floor, below which records are already there and are not read again.
 * A group's records, dead-lettered records, offset-map segments (the same bytes as the Python
 * writer's) and new progress (sendOffsetsToTransaction) commit in one transaction; any doubt aborts
 * and fails the task. A record the broker refuses inside a transaction makes the transaction
 * abortable, so it cannot be dead-lettered there: the transaction aborts and the row carries the
 * refusal (the flow stops, naming it), whatever errors.tolerance says.
 */
package sparkmirror.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public final class RangeCopier {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Logger LOG = LoggerFactory.getLogger("sparkmirror.jvm.RangeCopier");

    /* The same estimate of a record's size in a batch of its own as the Python sink's record_size. */
    private static final int BATCH_OVERHEAD = 61;
    private static final int RECORD_OVERHEAD = 21;
    private static final int HEADER_OVERHEAD = 10;
    /* How often a wait on the target says what it waits for. */
    private static final long WARN_EVERY_MS = 15_000;
    private static final String DLQ_HEADER_PREFIX = "__connect.errors.";
    /* This JVM, as the rows name their writer (the driver's record of who used a transactional id last). */
    private static final String WRITER = "jvm:" + ManagementFactory.getRuntimeMXBean().getName();
    /* Transaction groups whose transactions one task finishes at the same time. */
    private static final int MAX_COMMIT_THREADS = 8;
    /* All aborts of a failed task together wait at most this long (the next attempt fences anyway). */
    private static final long ABORT_MS = 30_000;

    /* Clients kept per executor JVM between tasks, keyed by their configuration; a task borrows
     * its own (a consumer is not thread-safe) and closes them after a failure. */
    private static final Map<String, ConcurrentLinkedDeque<KafkaProducer<byte[], byte[]>>> PRODUCERS =
        new ConcurrentHashMap<>();
    private static final Map<String, ConcurrentLinkedDeque<KafkaConsumer<byte[], byte[]>>> CONSUMERS =
        new ConcurrentHashMap<>();
    /* Exactly once: per transactional id (and generation, settings), producers that called initTransactions. */
    private static final Map<String, ConcurrentLinkedDeque<KafkaProducer<byte[], byte[]>>> TRANSACTIONAL =
        new ConcurrentHashMap<>();
    /* Exactly once: per kept transactional producer, the progress it committed itself (remote partition ->
     * next source offset). While the producer can still commit, nobody else has called initTransactions
     * with its id since that commit, so nobody else committed progress for those partitions: this is what
     * the target holds, without asking it (and waiting for the commit's markers, which read_committed
     * offsets do: seconds at 1,000 partitions). A producer that was fenced since cannot commit the
     * transaction that relied on it. Dropped with the producer. */
    private static final Map<KafkaProducer<byte[], byte[]>, Map<TopicPartition, Long>> COMMITTED =
        new ConcurrentHashMap<>();

    private RangeCopier() {
    }

    /**
     * Runs one Spark job with a task per group of ranges; returns the tasks' JSON rows as a JSON
     * array. {@code groupsJson}: [[[topic, partition, start, until], ...], ...].
     */
    public static String copy(JavaSparkContext jsc, String planJson, String groupsJson) throws Exception {
        List<String> groups = new ArrayList<>();
        for (JsonNode group : JSON.readTree(groupsJson)) {
            groups.add(JSON.writeValueAsString(group));
        }
        if (groups.isEmpty()) {
            return "[]";
        }
        List<String> rows = jsc.parallelize(groups, groups.size()).mapPartitions(new Task(planJson)).collect();
        ArrayNode out = JSON.createArrayNode();
        for (String row : rows) {
            out.add(JSON.readTree(row));
        }
        return JSON.writeValueAsString(out);
    }

    /** A task: copies each group of ranges it is given. */
    static final class Task implements FlatMapFunction<Iterator<String>, String> {
        private static final long serialVersionUID = 1L;
        private final String planJson;

        Task(String planJson) {
            this.planJson = planJson;
        }

        @Override
        public Iterator<String> call(Iterator<String> groups) throws Exception {
            Plan plan = new Plan(JSON.readTree(planJson));
            List<String> rows = new ArrayList<>();
            while (groups.hasNext()) {
                JsonNode group = JSON.readTree(groups.next());
                for (Part part : new Copy(plan, group).run()) {
                    rows.add(JSON.writeValueAsString(part.row(plan)));
                }
            }
            return rows.iterator();
        }
    }

    /** What every task of a batch needs, from the driver's JSON. */
    static final class Plan {
        final String flow;
        final Map<String, Object> producer = new HashMap<>();
        final Map<String, Object> consumer = new HashMap<>();
        final String producerKey;
        final String consumerKey;
        final Map<String, String> remotes = new HashMap<>();
        final Map<String, Integer> limits = new HashMap<>();
        final boolean tolerateAll;
        final String deadLetterTopic;
        final long flushTimeoutMs;
        final long stallTimeoutMs;
        final long testFailAfterRecords;
        final boolean testFailAfterCommit;
        final int fetchWindow;
        final String deliveryTimeoutMs;
        /* Exactly once: the offset map's topic, the progress group and a consumer of it on the target. */
        final boolean exactlyOnce;
        final String offsetMapTopic;
        final String progressGroup;
        final Map<String, Object> progress = new HashMap<>();
        final String progressKey;
        /* Changes whenever the driver fences the flow's ids: producers of an older one are fenced. */
        final String generation;
        final String transactionTimeoutMs;
        /* How long one step of a transaction (fencing, the progress, the offsets, the commit) may wait. */
        final long targetWaitMs;
        /* Transactional id -> the writer that used it last, as the driver saw it in the rows. */
        final Map<String, String> writers = new HashMap<>();
        /* "topic\npartition" -> the partition's last offset-map segment (upstream, downstream, count). */
        final Map<String, long[]> tails = new HashMap<>();

        Plan(JsonNode p) {
            flow = p.get("flow").asText();
            p.get("producer").properties().forEach(e -> producer.put(e.getKey(), e.getValue().asText()));
            p.get("consumer").properties().forEach(e -> consumer.put(e.getKey(), e.getValue().asText()));
            producer.put("key.serializer", ByteArraySerializer.class.getName());
            producer.put("value.serializer", ByteArraySerializer.class.getName());
            consumer.put("key.deserializer", ByteArrayDeserializer.class.getName());
            consumer.put("value.deserializer", ByteArrayDeserializer.class.getName());
            producerKey = key(flow, producer);
            consumerKey = key(flow, consumer);
            p.get("remotes").properties().forEach(e -> remotes.put(e.getKey(), e.getValue().asText()));
            p.get("limits").properties().forEach(e -> limits.put(e.getKey(), e.getValue().asInt()));
            tolerateAll = "all".equals(p.get("errors_tolerance").asText());
            deadLetterTopic = p.get("dead_letter_topic").asText();
            flushTimeoutMs = p.get("flush_timeout_ms").asLong();
            stallTimeoutMs = p.get("stall_timeout_ms").asLong();
            testFailAfterRecords = p.get("test_fail_after_records").asLong();
            testFailAfterCommit = p.path("test_fail_after_commit").asBoolean(false);
            fetchWindow = Math.max(1, p.get("fetch_window").asInt());
            Object timeout = producer.get("delivery.timeout.ms");
            deliveryTimeoutMs = timeout == null ? "120000" : timeout.toString();
            exactlyOnce = p.path("exactly_once").asBoolean(false);
            offsetMapTopic = p.path("offset_map_topic").asText("");
            progressGroup = p.path("progress_group").asText("");
            p.path("progress_consumer").properties().forEach(e -> progress.put(e.getKey(), e.getValue().asText()));
            progress.put("key.deserializer", ByteArrayDeserializer.class.getName());
            progress.put("value.deserializer", ByteArrayDeserializer.class.getName());
            progressKey = key(flow + "\u0001progress", progress);
            generation = p.path("generation").asText("");
            transactionTimeoutMs = p.path("transaction_timeout_ms").asText("300000");
            targetWaitMs = p.path("target_wait_ms").asLong(120_000);
            p.path("writers").properties().forEach(e -> writers.put(e.getKey(), e.getValue().asText()));
            for (JsonNode t : p.path("tails")) {
                tails.put(t.get(0).asText() + "\n" + t.get(1).asInt(),
                    new long[] {t.get(2).asLong(), t.get(3).asLong(), t.get(4).asLong()});
            }
        }

        /** The producer of one transactional id: the flow's producer settings with the id. */
        Map<String, Object> transactional(String tid) {
            Map<String, Object> conf = new HashMap<>(producer);
            conf.put("transactional.id", tid);
            conf.put("transaction.timeout.ms", transactionTimeoutMs);
            return conf;
        }

        /* Per id, so that borrowing one id's producer never lets another id's idle one go (see borrow). */
        String transactionalKey(String tid) {
            return flow + "\u0001" + tid + "\n" + generation + "\n" + new TreeMap<>(transactional(tid));
        }

        /* The flow first: a flow's clients of an older configuration are let go (see borrow). */
        private static String key(String flow, Map<String, Object> conf) {
            return flow + "\n" + new TreeMap<>(conf);
        }
    }

    /** A record the target refused for good: its source offset, the record (null: read it again), why, and
     * whether it was refused only for being in a batch with an invalid record (KIP-467: the broker names the
     * invalid records, the Java producer fails their batch-mates with a plain KafkaException). */
    record Refused(long offset, ConsumerRecord<byte[], byte[]> record, String reason, boolean batchMate, long seq) {
        Refused(long offset, ConsumerRecord<byte[], byte[]> record, String reason, boolean batchMate) {
            this(offset, record, reason, batchMate, REFUSALS.incrementAndGet());
        }
    }

    /* The order refusals arrive in: inside a transaction the first refusal makes it abortable, and the Java
     * producer then fails the batches it had not sent with the same error, innocent records included. */
    private static final AtomicLong REFUSALS = new AtomicLong();

    /* How the Java producer fails the records batched with an invalid one (kafka-clients' Sender). */
    private static final String BATCH_MATE = "part of a batch which had one more more invalid records";

    /** One source partition's range within a task: what was sent, acknowledged, refused. */
    static final class Part {
        final String topic;
        final int partition;
        final String remote;
        final Integer limit;
        final long start;
        final long until;
        /* Per source offset (index offset - start): the target offset, once acknowledged. */
        final long[] target;
        /* Per source offset: 0 nothing (a gap in the source), 1 sent, 2 acknowledged, 3 failed. */
        final byte[] state;
        final ConcurrentLinkedQueue<Refused> refused = new ConcurrentLinkedQueue<>();
        /* The first failure that fails the task: [source offset, text]. */
        volatile Object[] failure;
        long next;
        long records;
        long bytes;
        long firstOffset = -1;
        long lastOffset = -1;
        long maxTs = -1;
        long minTs = Long.MAX_VALUE;
        long tsSum;
        long readAtMs;
        long ackedAtMs;
        long deadLettered;
        String refusal;
        long firstTarget = -1;
        long lastTarget = -1;
        List<long[]> segments;
        /* Who writes this partition: the task's producer, or (exactly once) its transaction group's. */
        KafkaProducer<byte[], byte[]> producer;
        /* Exactly once: the partition's transaction; records below floor are on the target already. */
        Txn txn;
        long floor = -1;

        Part(String topic, int partition, String remote, Integer limit, long start, long until) {
            this.topic = topic;
            this.partition = partition;
            this.remote = remote;
            this.limit = limit;
            this.start = start;
            this.until = until;
            this.next = start;
            int size = (int) Math.max(0, until - start);
            this.target = new long[size];
            this.state = new byte[size];
        }

        String where() {
            return topic + "[" + partition + "]";
        }

        void throwIfFailed(Plan plan) {
            Object[] first = failure;
            if (first != null) {
                throw new IllegalStateException("flow=" + plan.flow + " " + where() + " offset=" + first[0]
                    + ": delivery to " + remote + "[" + partition + "] failed (" + first[1]
                    + "); the batch will be replayed");
            }
        }

        synchronized void failed(long offset, String text) {
            if (failure == null || offset < (long) failure[0]) {
                failure = new Object[] {offset, text};
            }
        }

        /** The offset-map segments of what this task wrote, [upstream start, downstream start, count] each,
         * the first joined to the partition's last segment when it continues it on both sides (the Python
         * side's extend_tail); computed once. Sets the first and last target offsets. */
        List<long[]> segments(Plan plan) {
            if (segments != null) {
                return segments;
            }
            List<long[]> out = new ArrayList<>();
            long previous = -1;
            long[] run = null;
            for (int k = 0; k < state.length; k++) {
                if (state[k] != 2) {
                    continue;
                }
                long u = start + k;
                long d = target[k];
                if (d <= previous) {
                    throw new IllegalStateException("flow=" + plan.flow + " " + where() + " offsets " + firstOffset
                        + ".." + lastOffset + ": the target assigned offsets to " + remote + "[" + partition
                        + "] out of produce order; the batch will be replayed");
                }
                previous = d;
                if (firstTarget < 0) {
                    firstTarget = d;
                }
                lastTarget = d;
                if (run != null && u == run[0] + run[2] && d == run[1] + run[2]) {
                    run[2]++;
                    continue;
                }
                run = new long[] {u, d, 1};
                out.add(run);
            }
            long[] tail = plan.tails.get(topic + "\n" + partition);
            if (!out.isEmpty() && tail != null) {
                long[] first = out.get(0);
                if (tail[0] + tail[2] == first[0] && tail[1] + tail[2] == first[1]) {
                    out.set(0, new long[] {tail[0], tail[1], tail[2] + first[2]});
                }
            }
            segments = out;
            return out;
        }

        ObjectNode row(Plan plan) {
            ObjectNode row = JSON.createObjectNode();
            row.put("topic", topic);
            row.put("partition", partition);
            row.put("records", records);
            row.put("bytes", bytes);
            row.put("first_offset", firstOffset);
            row.put("last_offset", lastOffset);
            ArrayNode out = row.putArray("segments");
            for (long[] seg : segments(plan)) {
                out.addArray().add(seg[0]).add(seg[1]).add(seg[2]);
            }
            row.put("first_target_offset", firstTarget);
            row.put("last_target_offset", lastTarget);
            row.put("dead_lettered", deadLettered);
            row.put("max_timestamp_ms", maxTs);
            row.put("min_timestamp_ms", records > 0 ? minTs : -1);
            row.put("read_at_ms", readAtMs);
            row.put("acked_at_ms", ackedAtMs);
            row.put("age_sum_ms", records > 0 ? readAtMs * records - tsSum : 0);
            row.put("latency_sum_ms", records > 0 ? ackedAtMs * records - tsSum : 0);
            row.put("error", refusal);
            row.put("writer", WRITER);
            return row;
        }
    }

    /** One group of ranges copied by one task. */
    static final class Copy {
        private final Plan plan;
        private final Map<TopicPartition, Part> parts = new LinkedHashMap<>();
        private final AtomicLong pending = new AtomicLong();
        private final Object acked = new Object();
        /* A delivery failed for a reason other than the record: the task fails, and sends stop now. */
        private volatile boolean failed;
        private long sent;
        /* Exactly once: each partition's transactional id (the range's fifth field). */
        private final Map<TopicPartition, String> tids = new HashMap<>();

        Copy(Plan plan, JsonNode group) {
            this.plan = plan;
            for (JsonNode r : group) {
                String topic = r.get(0).asText();
                int partition = r.get(1).asInt();
                String remote = plan.remotes.get(topic);
                Part part = new Part(topic, partition, remote, plan.limits.get(remote), r.get(2).asLong(),
                    r.get(3).asLong());
                TopicPartition tp = new TopicPartition(topic, partition);
                parts.put(tp, part);
                if (plan.exactlyOnce) {
                    tids.put(tp, r.get(4).asText());
                }
            }
        }

        List<Part> run() throws Exception {
            return plan.exactlyOnce ? runTransactional() : runAtLeastOnce();
        }

        private List<Part> runAtLeastOnce() throws Exception {
            KafkaProducer<byte[], byte[]> producer = borrow(PRODUCERS, plan.producerKey,
                () -> new KafkaProducer<>(plan.producer));
            parts.values().forEach(part -> part.producer = producer);
            KafkaConsumer<byte[], byte[]> consumer = null;
            boolean ok = false;
            try {
                consumer = copyAll();
                settleRefusals(producer, consumer, parts.values());
                ok = true;
                return new ArrayList<>(parts.values());
            } finally {
                giveBack(PRODUCERS, plan.producerKey, producer, ok);
                giveBackReader(consumer, ok);
            }
        }

        /** Reads every partition's range (from its floor up) and sends it; returns when every record is
         * acknowledged or refused, and fails the task on any other delivery failure. Returns the source
         * consumer it borrowed (null: nothing to read), for refused records to be read again. */
        private KafkaConsumer<byte[], byte[]> copyAll() throws Exception {
            Map<TopicPartition, Part> active = new LinkedHashMap<>();
            parts.forEach((tp, part) -> {
                if (part.until > part.next) {
                    active.put(tp, part);
                }
            });
            KafkaConsumer<byte[], byte[]> consumer = active.isEmpty() ? null
                : borrow(CONSUMERS, plan.consumerKey, () -> new KafkaConsumer<>(plan.consumer));
            try {
                if (consumer != null) {
                    read(consumer, active);
                }
                awaitAcks();
                long now = System.currentTimeMillis();
                for (Part part : parts.values()) {
                    part.ackedAtMs = now;
                    part.throwIfFailed(plan);
                }
                return consumer;
            } catch (Exception | Error e) {
                giveBackReader(consumer, false);  // the caller never gets it
                throw e;
            }
        }

        private void giveBackReader(KafkaConsumer<byte[], byte[]> consumer, boolean ok) {
            if (consumer == null) {
                return;
            }
            boolean clean = ok;
            try {
                consumer.unsubscribe();
            } catch (RuntimeException e) {
                clean = false;  // closed instead of kept; the task's own outcome stands
            }
            giveBack(CONSUMERS, plan.consumerKey, consumer, clean);
        }

        /** Exactly once: a transaction per transactional id of the task (see the file's comment). */
        private List<Part> runTransactional() throws Exception {
            Map<String, Txn> txns = new LinkedHashMap<>();
            KafkaConsumer<byte[], byte[]> consumer = null;
            boolean ok = false;
            try {
                for (Map.Entry<TopicPartition, Part> e : parts.entrySet()) {
                    String tid = tids.get(e.getKey());
                    Txn txn = txns.get(tid);
                    if (txn == null) {
                        // initTransactions: fences the id's earlier holders and completes their transaction,
                        // so the progress read next is final.
                        txn = new Txn(tid, borrowTransactional(plan, tid));
                        txns.put(tid, txn);
                    }
                    Part part = e.getValue();
                    txn.parts.add(part);
                    part.txn = txn;
                    part.producer = txn.producer;
                }
                readFloors();
                consumer = copyAll();
                finishAll(txns.values(), consumer);
                testHookAfterCommit();
                ok = true;
                return new ArrayList<>(parts.values());
            } finally {
                if (ok) {
                    txns.values().forEach(t -> giveBack(TRANSACTIONAL, plan.transactionalKey(t.tid), t.producer,
                        !t.broken));
                } else {
                    abandon(txns.values());
                }
                giveBackReader(consumer, ok);
            }
        }

        /** Every partition's progress on the target: its floor. What the partition's producer committed
         * itself is known (COMMITTED); the rest is read in one request. */
        private void readFloors() {
            Map<TopicPartition, Part> byRemote = new LinkedHashMap<>();
            Map<TopicPartition, Long> floors = new HashMap<>();
            for (Part part : parts.values()) {
                TopicPartition tp = new TopicPartition(part.remote, part.partition);
                byRemote.put(tp, part);
                Long known = COMMITTED.getOrDefault(part.producer, Map.of()).get(tp);
                if (known != null) {
                    floors.put(tp, known);
                }
            }
            Set<TopicPartition> ask = new HashSet<>(byRemote.keySet());
            ask.removeAll(floors.keySet());
            if (!ask.isEmpty()) {
                KafkaConsumer<byte[], byte[]> progress = borrow(CONSUMERS, plan.progressKey,
                    () -> new KafkaConsumer<>(plan.progress));
                boolean ok = false;
                try {
                    Map<TopicPartition, OffsetAndMetadata> committed = within(plan, "reading the progress of "
                        + names(ask) + " (group " + plan.progressGroup + ")",
                        () -> progress.committed(ask, Duration.ofMillis(plan.targetWaitMs)));
                    ask.forEach(tp -> {
                        OffsetAndMetadata at = committed.get(tp);
                        floors.put(tp, at == null ? -1L : at.offset());
                    });
                    ok = true;
                } finally {
                    giveBack(CONSUMERS, plan.progressKey, progress, ok);
                }
            }
            byRemote.forEach((tp, part) -> {
                part.floor = floors.get(tp);
                if (part.floor > part.start) {
                    part.next = Math.min(part.floor, part.until);
                    LOG.info("flow={} {} skips offsets {}..{}: already committed on the target (progress={})",
                        plan.flow, part.where(), part.start, part.next - 1, part.floor);
                }
            });
        }

        /** Each open transaction's refusals, segments, progress and commit; side by side, each on its own
         * round trips. Every transaction is settled before the first failure is thrown. */
        private void finishAll(java.util.Collection<Txn> txns, KafkaConsumer<byte[], byte[]> consumer)
                throws Exception {
            List<Txn> open = txns.stream().filter(t -> t.open).toList();
            if (open.size() <= 1) {
                for (Txn t : open) {
                    finish(t, consumer);  // no thread for a lone transaction
                }
                return;
            }
            ExecutorService pool = Executors.newFixedThreadPool(Math.min(open.size(), MAX_COMMIT_THREADS));
            try {
                List<Future<?>> futures = new ArrayList<>();
                for (Txn t : open) {
                    futures.add(pool.submit(() -> {
                        finish(t, consumer);
                        return null;
                    }));
                }
                Exception first = null;
                for (Future<?> f : futures) {
                    try {
                        f.get();
                    } catch (java.util.concurrent.ExecutionException e) {
                        Exception cause = e.getCause() instanceof Exception c ? c : e;
                        if (first == null) {
                            first = cause;
                        } else {
                            LOG.error("flow={} {}", plan.flow, cause.getMessage());
                        }
                    }
                }
                if (first != null) {
                    throw first;
                }
            } finally {
                pool.shutdownNow();
                awaitQuietly(pool);  // interrupted (a killed attempt): abandon must not race a commit
            }
        }

        private void finish(Txn t, KafkaConsumer<byte[], byte[]> consumer) throws Exception {
            if (settleRefusals(t.producer, consumer, t.parts)) {
                // The driver stops the flow; nothing of the group commits.
                try {
                    t.producer.abortTransaction();
                } catch (KafkaException e) {
                    // Fatal to the producer (an authorization failure of a transactional producer): closed,
                    // not kept; the transaction is aborted by the coordinator at its timeout or next fencing.
                    t.broken = true;
                    LOG.warn("flow={}: abort of {} failed ({}); its producer is closed", plan.flow, t.tid, e.toString());
                }
                t.open = false;
                return;
            }
            long now = System.currentTimeMillis();
            Map<TopicPartition, OffsetAndMetadata> positions = new LinkedHashMap<>();
            for (Part part : t.parts) {
                if (part.firstOffset < 0) {
                    continue;  // nothing written: its progress stays
                }
                if (!plan.offsetMapTopic.isEmpty()) {
                    for (long[] seg : part.segments(plan)) {
                        // The offset map has one partition (the lease's member owns it).
                        t.producer.send(new ProducerRecord<>(plan.offsetMapTopic, 0,
                            segmentKey(part.topic, part.partition, seg[0]), segmentValue(seg, now)));
                    }
                }
                positions.put(new TopicPartition(part.remote, part.partition),
                    new OffsetAndMetadata(part.lastOffset + 1));
            }
            String where = "flow=" + plan.flow + " " + ranges(t.parts);
            ConsumerGroupMetadata group = new ConsumerGroupMetadata(plan.progressGroup);
            try {
                within(plan, where + ": sendOffsetsToTransaction(" + t.tid + ", " + positions.size() + " partitions)",
                    () -> {
                        t.producer.sendOffsetsToTransaction(positions, group);
                        return null;
                    });
                within(plan, where + ": commitTransaction(" + t.tid + ")", () -> {
                    t.producer.commitTransaction();
                    return null;
                });
                Map<TopicPartition, Long> known = COMMITTED.computeIfAbsent(t.producer, k -> new ConcurrentHashMap<>());
                positions.forEach((tp, at) -> known.put(tp, at.offset()));
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                throw new IllegalStateException(where + ": transaction of " + t.tid + " not committed ("
                    + e.getClass().getSimpleName() + ": " + e.getMessage()
                    + "); another writer of these partitions took over", e);
            } catch (KafkaException e) {
                throw new IllegalStateException(where + ": transaction of " + t.tid + " not committed ("
                    + e.getClass().getSimpleName() + ": " + e.getMessage() + "); the ranges will be replayed", e);
            }
            t.open = false;
        }

        /** After a failure: abort what is open (all aborts within ABORT_MS), close every producer of the
         * task; the next attempt makes new ones, whose initTransactions fences anything left. */
        private void abandon(java.util.Collection<Txn> txns) {
            List<Txn> open = txns.stream().filter(t -> t.open).toList();
            if (!open.isEmpty()) {
                ExecutorService pool = Executors.newSingleThreadExecutor();
                try {
                    Future<?> aborts = pool.submit(() -> {
                        for (Txn t : open) {
                            try {
                                t.producer.abortTransaction();
                            } catch (RuntimeException e) {
                                LOG.debug("flow={}: abort of {} failed: {}", plan.flow, t.tid, e.toString());
                            }
                        }
                    });
                    aborts.get(ABORT_MS, TimeUnit.MILLISECONDS);
                } catch (Exception e) {
                    if (e instanceof InterruptedException) {
                        Thread.currentThread().interrupt();
                    }
                    LOG.warn("flow={}: the failed task's transactions were not all aborted ({}); the next "
                        + "attempt fences them", plan.flow, e.toString());
                } finally {
                    pool.shutdownNow();
                }
            }
            for (Txn t : txns) {
                t.open = false;
                giveBack(TRANSACTIONAL, plan.transactionalKey(t.tid), t.producer, false);
            }
        }

        private void read(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Part> active) {
            consumer.assign(active.keySet());
            active.forEach((tp, part) -> consumer.seek(tp, part.next));
            // The Java consumer keeps up to max.partition.fetch.bytes of fetched records for every partition
            // it may fetch, however many: at 500 partitions a task that is 500 MiB, and two tasks ran out of
            // the driver's 1 GiB heap. So at most fetchWindow partitions are fetched at a time, the others
            // paused until one is done (the plan's fetch_window).
            ArrayDeque<TopicPartition> waiting = new ArrayDeque<>(active.keySet());
            Set<TopicPartition> assigned = new HashSet<>(active.keySet());
            consumer.pause(active.keySet());
            resumeNext(consumer, waiting, plan.fetchWindow);
            long lastProgress = System.currentTimeMillis();
            while (!active.isEmpty()) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                long now = System.currentTimeMillis();
                if (!batch.isEmpty()) {
                    lastProgress = now;
                }
                for (TopicPartition tp : batch.partitions()) {
                    Part part = active.get(tp);
                    if (part == null) {
                        continue;
                    }
                    for (ConsumerRecord<byte[], byte[]> r : batch.records(tp)) {
                        long offset = r.offset();
                        if (offset >= part.until) {
                            break;
                        }
                        if (offset < part.next) {
                            continue;
                        }
                        part.next = offset + 1;
                        write(part, r, now);
                    }
                }
                List<TopicPartition> done = new ArrayList<>();
                for (Map.Entry<TopicPartition, Part> e : active.entrySet()) {
                    Part part = e.getValue();
                    // position() is past transaction markers and aborted records the consumer skipped.
                    if (part.next >= part.until || consumer.position(e.getKey()) >= part.until) {
                        done.add(e.getKey());
                    }
                }
                if (!done.isEmpty()) {
                    done.forEach(active::remove);
                    // Unassigned, not paused: the consumer keeps a paused partition's fetched records past
                    // the range (up to max.partition.fetch.bytes each) for as long as it stays assigned.
                    assigned.removeAll(done);
                    consumer.assign(assigned);
                    waiting.removeAll(done);
                    resumeNext(consumer, waiting, done.size());
                    lastProgress = now;
                }
                if (!active.isEmpty() && now - lastProgress > plan.stallTimeoutMs) {
                    StringBuilder where = new StringBuilder();
                    active.values().forEach(p -> where.append(' ').append(p.where()).append(" at ").append(p.next)
                        .append(" of ").append(p.until));
                    throw new IllegalStateException("flow=" + plan.flow + ": no record from the source for "
                        + plan.stallTimeoutMs / 1000 + "s:" + where + "; the batch will be replayed");
                }
                testHook();
                failFast();
            }
        }

        /** A delivery that failed for a reason other than the record stops the read now: the task fails
         * anyway, and sends to a target that stays away would each wait up to max.block.ms. */
        private void failFast() {
            for (Part part : parts.values()) {
                part.throwIfFailed(plan);
            }
        }

        private static void resumeNext(KafkaConsumer<byte[], byte[]> consumer, ArrayDeque<TopicPartition> waiting,
                                       int n) {
            List<TopicPartition> next = new ArrayList<>();
            while (next.size() < n && !waiting.isEmpty()) {
                next.add(waiting.pollFirst());
            }
            consumer.resume(next);
        }

        private void write(Part part, ConsumerRecord<byte[], byte[]> r, long now) {
            if (failed) {
                failFast();  // each send to a target that stays away could wait up to max.block.ms
            }
            Txn txn = part.txn;
            if (txn != null && !txn.open) {
                txn.producer.beginTransaction();
                txn.open = true;
            }
            long offset = r.offset();
            if (part.firstOffset < 0) {
                part.firstOffset = offset;
                part.readAtMs = now;
            }
            part.lastOffset = offset;
            part.records++;
            byte[] key = r.key();
            byte[] value = r.value();
            int n = (key == null ? 0 : key.length) + (value == null ? 0 : value.length);
            part.bytes += n;
            long ts = r.timestamp() > 0 ? r.timestamp() : 0;
            part.tsSum += ts;
            part.maxTs = Math.max(part.maxTs, ts);
            part.minTs = Math.min(part.minTs, ts);
            if (part.limit != null && size(key, value, r.headers()) > part.limit) {
                part.refused.add(new Refused(offset, r,
                    "MSG_SIZE_TOO_LARGE: larger than max.message.bytes=" + part.limit, false));
                return;
            }
            int k = (int) (offset - part.start);
            part.state[k] = 1;
            pending.incrementAndGet();
            sent++;
            part.producer.send(new ProducerRecord<>(part.remote, part.partition, ts > 0 ? ts : null, key, value,
                r.headers()), new Ack(part, k));
        }

        /** A record's acknowledgement (on the producer's I/O thread). It holds no record: a record the
         * target refuses is read again from the source to be dead-lettered, so records in flight cost
         * the producer's buffer only. */
        private final class Ack implements Callback {
            private final Part part;
            private final int k;

            Ack(Part part, int k) {
                this.part = part;
                this.k = k;
            }

            @Override
            public void onCompletion(RecordMetadata metadata, Exception error) {
                if (error == null) {
                    part.target[k] = metadata.offset();
                    part.state[k] = 2;
                } else {
                    part.state[k] = 3;
                    String reason = name(error) + ": " + error.getMessage();
                    long offset = part.start + k;
                    if (isRecordError(error)) {
                        part.refused.add(new Refused(offset, null, reason, false));
                    } else if (error.getClass() == KafkaException.class && String.valueOf(error.getMessage())
                            .contains(BATCH_MATE)) {
                        part.refused.add(new Refused(offset, null,
                            "INVALID_RECORD: in a produce batch with a record the target refused", true));
                    } else {
                        part.failed(offset, reason);
                        failed = true;
                    }
                }
                if (pending.decrementAndGet() == 0) {
                    synchronized (acked) {
                        acked.notifyAll();
                    }
                }
            }
        }

        private void awaitAcks() throws InterruptedException {
            long started = System.currentTimeMillis();
            long deadline = started + plan.flushTimeoutMs;
            long nextWarning = started + WARN_EVERY_MS;
            synchronized (acked) {
                while (pending.get() > 0) {
                    long now = System.currentTimeMillis();
                    if (now >= deadline) {
                        throw new IllegalStateException("flow=" + plan.flow + ": " + pending.get()
                            + " records not acknowledged by the target within " + plan.flushTimeoutMs / 1000
                            + "s; the batch will be replayed");
                    }
                    if (now >= nextWarning) {
                        nextWarning += WARN_EVERY_MS;
                        LOG.warn("flow={}: {} records not yet acknowledged by the target after {}s", plan.flow,
                            pending.get(), (now - started) / 1000);
                    }
                    acked.wait(Math.min(1000, deadline - now));
                }
            }
        }

        /** Records the target refused for good among {@code group}'s: dead-lettered (errors.tolerance=all),
         * or the first becomes its partition's refusal and this returns true (the driver stops the flow). */
        private boolean settleRefusals(KafkaProducer<byte[], byte[]> producer, KafkaConsumer<byte[], byte[]> consumer,
                                       java.util.Collection<Part> group) throws Exception {
            List<Object[]> all = new ArrayList<>();
            boolean byBroker = false;
            for (Part part : group) {
                List<Refused> refused = new ArrayList<>(part.refused);
                refused.sort((a, b) -> Long.compare(a.offset(), b.offset()));
                for (Refused f : refused) {
                    all.add(new Object[] {part, f});
                    byBroker |= f.record() == null;  // refused by a broker, not by the size check here
                }
            }
            if (all.isEmpty()) {
                return false;
            }
            // In a transaction, a send the broker refused leaves the transaction abortable: nothing sent in
            // it, a dead-lettered record neither, can commit.
            boolean inTransaction = plan.exactlyOnce && byBroker;
            if (!plan.tolerateAll || inTransaction) {
                // Name the record the target refused, not one refused only for sharing its batch.
                java.util.stream.Stream<Object[]> named = all.stream().filter(item -> !((Refused) item[1]).batchMate());
                Object[] first = (inTransaction
                    ? named.min((a, b) -> Long.compare(((Refused) a[1]).seq(), ((Refused) b[1]).seq()))
                    : named.findFirst()).orElse(all.get(0));
                Part part = (Part) first[0];
                Refused f = (Refused) first[1];
                String hint = f.reason().contains("AUTHORIZATION_FAILED")
                    ? "check the principal's ACLs on the target"
                    : inTransaction && plan.tolerateAll
                    ? "a record refused inside a transaction aborts it, so exactly-once cannot dead-letter it; "
                        + "raise the target's max.message.bytes / the producer's max.request.size"
                    : "raise the target's max.message.bytes / the producer's max.request.size, "
                        + "or set errors.tolerance=all to send such records to the dead-letter topic";
                part.refusal = "flow=" + plan.flow + " " + part.where() + " offset=" + f.offset()
                    + ": the target refused the record for " + part.remote + "[" + part.partition + "] ("
                    + f.reason() + "); " + hint;
                return true;
            }
            List<java.util.concurrent.Future<RecordMetadata>> sends = new ArrayList<>();
            for (Object[] item : all) {
                Part part = (Part) item[0];
                Refused f = (Refused) item[1];
                if (f.record() == null) {
                    f = new Refused(f.offset(), readAgain(consumer, part, f.offset()), f.reason(), f.batchMate(), f.seq());
                }
                RecordHeaders headers = new RecordHeaders(f.record().headers().toArray());
                headers.add(DLQ_HEADER_PREFIX + "topic", bytes(part.topic));
                headers.add(DLQ_HEADER_PREFIX + "partition", bytes(Integer.toString(part.partition)));
                headers.add(DLQ_HEADER_PREFIX + "offset", bytes(Long.toString(f.offset())));
                headers.add(DLQ_HEADER_PREFIX + "exception.message", bytes(f.reason()));
                headers.add(DLQ_HEADER_PREFIX + "remote.topic", bytes(part.remote));
                byte[] value = f.record().value();
                if (f.reason().contains("SIZE_TOO_LARGE") || f.reason().contains("LIST_TOO_LARGE")) {
                    headers.add(DLQ_HEADER_PREFIX + "value.omitted.bytes",
                        bytes(Integer.toString(value == null ? 0 : value.length)));
                    value = null;
                }
                long ts = f.record().timestamp();
                sends.add(producer.send(new ProducerRecord<>(plan.deadLetterTopic, null, ts > 0 ? ts : null,
                    f.record().key(), value, headers)));
                part.deadLettered++;
                LOG.warn("flow={} {} offset={} sent to dead-letter topic {}: {}", plan.flow, part.where(),
                    f.offset(), plan.deadLetterTopic, f.reason());
            }
            producer.flush();
            for (java.util.concurrent.Future<RecordMetadata> send : sends) {
                try {
                    send.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    throw new IllegalStateException("flow=" + plan.flow + ": could not write to dead-letter topic "
                        + plan.deadLetterTopic + ": " + e.getCause().getMessage(), e.getCause());
                }
            }
            return false;
        }

        /** The source record at {@code offset} of {@code part}, read again (to dead-letter it). */
        private ConsumerRecord<byte[], byte[]> readAgain(KafkaConsumer<byte[], byte[]> consumer, Part part,
                                                         long offset) {
            synchronized (consumer) {  // exactly once finishes transactions side by side
                return readAgainAlone(consumer, part, offset);
            }
        }

        private ConsumerRecord<byte[], byte[]> readAgainAlone(KafkaConsumer<byte[], byte[]> consumer, Part part,
                                                              long offset) {
            TopicPartition tp = new TopicPartition(part.topic, part.partition);
            consumer.assign(List.of(tp));
            consumer.resume(List.of(tp));  // paused when its range was read
            consumer.seek(tp, offset);
            long deadline = System.currentTimeMillis() + plan.stallTimeoutMs;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100)).records(tp)) {
                    if (r.offset() == offset) {
                        return r;
                    }
                    if (r.offset() > offset) {
                        break;
                    }
                }
                if (consumer.position(tp) > offset) {
                    break;
                }
            }
            throw new IllegalStateException("flow=" + plan.flow + " " + part.where() + " offset=" + offset
                + ": the target refused the record and it could not be read again from the source to dead-letter "
                + "it; the batch will be replayed");
        }

        /** TEST HOOK: the first attempt of an exactly-once task fails once its transactions committed. */
        private void testHookAfterCommit() {
            TaskContext ctx = TaskContext.get();
            if (plan.testFailAfterCommit && ctx != null && ctx.attemptNumber() == 0) {
                TEST_HOOK_FAILURES.incrementAndGet();
                throw new IllegalStateException("injected task failure after its commit (test hook)");
            }
        }

        /** TEST HOOK: the first attempt of a task fails once it has sent enough records. */
        private void testHook() {
            if (plan.testFailAfterRecords <= 0 || sent < plan.testFailAfterRecords) {
                return;
            }
            TaskContext ctx = TaskContext.get();
            if (ctx != null && ctx.attemptNumber() == 0) {
                parts.values().stream().map(part -> part.producer).distinct().forEach(KafkaProducer::flush);
                throw new IllegalStateException("injected task failure after " + sent + " records (test hook)");
            }
        }
    }

    /** Exactly once: one transactional id's producer, and the task's partitions it writes. */
    static final class Txn {
        final String tid;
        final KafkaProducer<byte[], byte[]> producer;
        final List<Part> parts = new ArrayList<>();
        /* beginTransaction was called and neither commit nor abort since. */
        volatile boolean open;
        /* Its producer failed for good: closed after the task, not kept. */
        volatile boolean broken;

        Txn(String tid, KafkaProducer<byte[], byte[]> producer) {
            this.tid = tid;
            this.producer = producer;
        }
    }

    /** The producer of {@code tid}, after its initTransactions: kept from an earlier task of this JVM, or
     * new. If the driver says another writer used the id last, that writer's initTransactions fenced the
     * ones kept here: they are closed, not tried. */
    static KafkaProducer<byte[], byte[]> borrowTransactional(Plan plan, String tid) {
        String key = plan.transactionalKey(tid);
        String last = plan.writers.get(tid);
        if (last != null && !last.equals(WRITER)) {
            ConcurrentLinkedDeque<KafkaProducer<byte[], byte[]>> kept = TRANSACTIONAL.get(key);
            KafkaProducer<byte[], byte[]> fenced;
            while (kept != null && (fenced = kept.pollFirst()) != null) {
                giveBack(TRANSACTIONAL, key, fenced, false);
            }
        }
        return borrow(TRANSACTIONAL, key, () -> {
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(plan.transactional(tid));
            try {
                within(plan, "initTransactions(" + tid + ")", () -> {
                    producer.initTransactions();
                    return null;
                });
            } catch (RuntimeException e) {
                producer.close(Duration.ZERO);
                throw e;
            }
            return producer;
        });
    }

    /** Waits (at most ABORT_MS) for a pool's threads to end, also when this thread is interrupted (the
     * flag is set again after): a producer is not aborted or closed while one of them is inside a call. */
    static void awaitQuietly(ExecutorService pool) {
        boolean interrupted = false;
        long deadline = System.currentTimeMillis() + ABORT_MS;
        for (long left = ABORT_MS; left > 0; left = deadline - System.currentTimeMillis()) {
            try {
                if (pool.awaitTermination(left, TimeUnit.MILLISECONDS)) {
                    break;
                }
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    interface Step<T> {
        T run();
    }

    /** {@code step}, again after each timeout until the plan's target wait is over; then the task fails
     * saying what it waited for. initTransactions and commitTransaction resume the call that timed out;
     * sendOffsetsToTransaction sends its (same) offsets again; committed() asks again. */
    static <T> T within(Plan plan, String what, Step<T> step) {
        long started = System.currentTimeMillis();
        while (true) {
            try {
                return step.run();
            } catch (TimeoutException e) {
                long waited = System.currentTimeMillis() - started;
                if (waited >= plan.targetWaitMs) {
                    throw new IllegalStateException("flow=" + plan.flow + " " + what + ": no answer from the target "
                        + "within " + waited / 1000 + "s (" + e.getMessage() + "); the batch will be replayed", e);
                }
                LOG.warn("flow={} {}: still waiting for the target after {}s ({})", plan.flow, what, waited / 1000,
                    e.getMessage());
            }
        }
    }

    /** ``topic[p] offsets a..b`` of a transaction's partitions, the first five of them. */
    static String ranges(List<Part> parts) {
        StringBuilder out = new StringBuilder();
        List<Part> written = parts.stream().filter(p -> p.firstOffset >= 0).toList();
        for (Part p : written.subList(0, Math.min(5, written.size()))) {
            out.append(out.length() > 0 ? ", " : "").append(p.where()).append(" offsets ").append(p.firstOffset)
                .append("..").append(p.lastOffset);
        }
        return written.size() > 5 ? out + " and " + (written.size() - 5) + " more partitions" : out.toString();
    }

    static String names(Set<TopicPartition> tps) {
        List<String> out = tps.stream().limit(5).map(tp -> tp.topic() + "[" + tp.partition() + "]").toList();
        return String.join(", ", out) + (tps.size() > 5 ? " …" : "");
    }

    /** An offset-map segment's key: version 0, topic, partition, upstream start (core/formats.py). */
    static byte[] segmentKey(String topic, int partition, long upstreamStart) {
        byte[] name = bytes(topic);
        return ByteBuffer.allocate(2 + 2 + name.length + 4 + 8).putShort((short) 0).putShort((short) name.length)
            .put(name).putInt(partition).putLong(upstreamStart).array();
    }

    /** An offset-map segment's value: version 0, upstream start, downstream start, count, written at (ms). */
    static byte[] segmentValue(long[] segment, long writtenAtMs) {
        return ByteBuffer.allocate(2 + 4 * 8).putShort((short) 0).putLong(segment[0]).putLong(segment[1])
            .putLong(segment[2]).putLong(writtenAtMs).array();
    }

    static int size(byte[] key, byte[] value, Iterable<Header> headers) {
        int size = BATCH_OVERHEAD + RECORD_OVERHEAD + (key == null ? 0 : key.length)
            + (value == null ? 0 : value.length);
        for (Header h : headers) {
            size += HEADER_OVERHEAD + h.key().getBytes(StandardCharsets.UTF_8).length
                + (h.value() == null ? 0 : h.value().length);
        }
        return size;
    }

    private static final Set<Class<? extends Exception>> RECORD_ERRORS = Set.of(
        RecordTooLargeException.class, RecordBatchTooLargeException.class, InvalidRecordException.class,
        InvalidTimestampException.class, CorruptRecordException.class, TopicAuthorizationException.class,
        ClusterAuthorizationException.class, PolicyViolationException.class);

    static boolean isRecordError(Exception error) {
        for (Class<? extends Exception> c : RECORD_ERRORS) {
            if (c.isInstance(error)) {
                return true;
            }
        }
        return false;
    }

    /** The error's name as the Python sink says it (librdkafka's names for the record errors). */
    static String name(Exception error) {
        if (error instanceof RecordTooLargeException) {
            return "MSG_SIZE_TOO_LARGE";
        }
        if (error instanceof RecordBatchTooLargeException) {
            return "RECORD_LIST_TOO_LARGE";
        }
        if (error instanceof InvalidRecordException) {
            return "INVALID_RECORD";
        }
        if (error instanceof TopicAuthorizationException) {
            return "TOPIC_AUTHORIZATION_FAILED";
        }
        if (error instanceof ClusterAuthorizationException) {
            return "CLUSTER_AUTHORIZATION_FAILED";
        }
        return error.getClass().getSimpleName();
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    interface Maker<T> {
        T make();
    }

    private static <T extends AutoCloseable> T borrow(Map<String, ConcurrentLinkedDeque<T>> pool, String key,
                                                      Maker<T> maker) {
        if (!pool.containsKey(key)) {
            // The flow's settings changed (a remote topic's limit moved batch.size): its idle clients of the
            // old settings would never be borrowed again.
            String flow = key.substring(0, key.indexOf('\n') + 1);
            for (Map.Entry<String, ConcurrentLinkedDeque<T>> e : pool.entrySet()) {
                if (e.getKey().startsWith(flow)) {
                    T idle;
                    while ((idle = e.getValue().pollFirst()) != null) {
                        giveBack(pool, e.getKey(), idle, false);
                    }
                }
            }
        }
        T client = pool.computeIfAbsent(key, k -> new ConcurrentLinkedDeque<>()).pollFirst();
        return client != null ? client : maker.make();
    }

    private static <T extends AutoCloseable> void giveBack(Map<String, ConcurrentLinkedDeque<T>> pool, String key,
                                                           T client, boolean ok) {
        if (ok) {
            pool.get(key).addFirst(client);
            return;
        }
        COMMITTED.remove(client);
        try {
            // After a failure a replay starts with new clients; records still in flight are failed now
            // rather than waited for (the task has failed already).
            if (client instanceof KafkaProducer<?, ?> producer) {
                producer.close(Duration.ZERO);
            } else if (client instanceof KafkaConsumer<?, ?> consumer) {
                consumer.close(Duration.ofSeconds(5));
            } else {
                client.close();
            }
        } catch (Exception e) {
            LOG.warn("closing a client after a failed task: {}", e.toString());
        }
    }

    /* TEST HOOK: tasks this JVM failed after their commit. */
    private static final AtomicLong TEST_HOOK_FAILURES = new AtomicLong();

    /** TEST HOOK: how many tasks this JVM failed after their commit (local masters: the driver's JVM). */
    public static long testHookFailuresAfterCommit() {
        return TEST_HOOK_FAILURES.get();
    }

    /** Closes every kept client (tests, and a stopping run). */
    public static void closeAll() {
        for (Map<String, ? extends ConcurrentLinkedDeque<? extends AutoCloseable>> pool : List.of(PRODUCERS, CONSUMERS,
                TRANSACTIONAL)) {
            for (ConcurrentLinkedDeque<? extends AutoCloseable> clients : pool.values()) {
                AutoCloseable c;
                while ((c = clients.pollFirst()) != null) {
                    try {
                        c.close();
                    } catch (Exception e) {
                        LOG.warn("closing a client: {}", e.toString());
                    }
                }
            }
        }
        COMMITTED.clear();
    }
}
