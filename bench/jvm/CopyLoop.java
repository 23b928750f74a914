/*
 * The benchmark's "limit": the least any replicator has to do, as plain JVM copy loops.
 *
 * Each of <threads> threads owns a share of the topic's partitions (round robin), one consumer
 * (assigned, no group, from the earliest offset, read_committed) and one producer, and writes
 * every record it reads, with its key, value, headers and timestamp, to the same partition of
 * the remote topic on the target. No offset map, no checkpoints, no topic management, no
 * framework: whatever a real replicator does on top of this is its overhead. The producers take
 * the same settings as the replicators under test (a properties file: acks, idempotence, linger,
 * batch size, compression, in-flight requests).
 *
 * Usage:
 *   CopyLoop <sourceBootstrap> <targetBootstrap> <topic> <remoteTopic> <count> <threads> <producer.properties>
 *
 * <topic> and <remoteTopic> may be comma-separated lists of the same length (the scale scenario:
 * every partition of every topic shared out among the threads).
 *
 * count > 0: stop once that many records were copied (every one acknowledged), then exit 0.
 * count <= 0: copy until SIGTERM, then flush what was sent and exit 0.
 * Any failed send exits 1 with the error on stderr. Stdout carries one line at the end:
 * "copied <n>".
 */

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class CopyLoop {

    private final java.util.Map<String, String> remotes = new java.util.HashMap<>();
    private final long count;
    private final AtomicLong copied = new AtomicLong();
    private final AtomicBoolean stopping = new AtomicBoolean();
    private final AtomicReference<Exception> failure = new AtomicReference<>();
    private final List<KafkaConsumer<byte[], byte[]>> consumers = new ArrayList<>();

    private CopyLoop(String[] topics, String[] remotes, long count) {
        if (topics.length != remotes.length) {
            throw new IllegalArgumentException("as many remote topics as topics are needed");
        }
        for (int i = 0; i < topics.length; i++) {
            this.remotes.put(topics[i], remotes[i]);
        }
        this.count = count;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: CopyLoop <sourceBootstrap> <targetBootstrap> <topic> <remoteTopic> <count> "
                + "<threads> <producer.properties>");
            System.exit(2);
        }
        String[] topics = args[2].split(",");
        CopyLoop loop = new CopyLoop(topics, args[3].split(","), Long.parseLong(args[4]));
        int threads = Integer.parseInt(args[5]);
        List<TopicPartition> partitions = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> meta = new KafkaConsumer<>(consumerProps(args[0]))) {
            for (String topic : topics) {
                for (PartitionInfo p : meta.partitionsFor(topic)) {
                    partitions.add(new TopicPartition(p.topic(), p.partition()));
                }
            }
        }
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < Math.min(threads, partitions.size()); t++) {
            List<TopicPartition> share = new ArrayList<>();
            for (int i = t; i < partitions.size(); i += threads) {
                share.add(partitions.get(i));
            }
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(args[0]));
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(args[1], args[6]));
            loop.consumers.add(consumer);
            Thread worker = new Thread(() -> loop.copy(consumer, producer, share), "copy-" + t);
            workers.add(worker);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            loop.stop();
            for (Thread w : workers) {
                try {
                    w.join();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }));
        workers.forEach(Thread::start);
        for (Thread w : workers) {
            w.join();
        }
        loop.stopping.set(true);  // all consumers are closed: the shutdown hook has nothing to wake
        if (loop.failure.get() != null) {
            loop.failure.get().printStackTrace();
            Runtime.getRuntime().halt(1);
        }
        System.out.println("copied " + loop.copied.get());
    }

    private void stop() {
        if (stopping.compareAndSet(false, true)) {
            consumers.forEach(KafkaConsumer::wakeup);
        }
    }

    private void copy(KafkaConsumer<byte[], byte[]> consumer, KafkaProducer<byte[], byte[]> producer,
                      List<TopicPartition> share) {
        try {
            consumer.assign(share);
            consumer.seekToBeginning(share);
            while (!stopping.get() && (count <= 0 || copied.get() < count) && failure.get() == null) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(
                        new ProducerRecord<>(remotes.get(r.topic()), r.partition(), r.timestamp(), r.key(), r.value(), r.headers()),
                        (metadata, error) -> {
                            if (error != null) {
                                failure.compareAndSet(null, error);
                            }
                        });
                }
                copied.addAndGet(records.count());
            }
        } catch (WakeupException e) {
            // SIGTERM: stop reading, deliver what was sent.
        } catch (RuntimeException e) {
            failure.compareAndSet(null, e);
        } finally {
            producer.flush();
            producer.close();
            consumer.close();
        }
    }

    private static Properties consumerProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        return props;
    }

    private static Properties producerProps(String bootstrap, String file) throws IOException {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(file)) {
            props.load(in);
        }
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return props;
    }
}
