/*
 * The benchmark's "limit": the least any replicator has to do, as one plain JVM loop.
 *
 * One consumer reads every partition of a topic on the source (assigned, no group, from the
 * earliest offset, read_committed) and one producer writes each record, with its key, value,
 * headers and timestamp, to the same partition of the remote topic on the target. No offset
 * map, no checkpoints, no topic management: whatever a real replicator does on top of this is
 * its overhead. The producer takes the same settings as the replicators under test (a
 * properties file: acks, idempotence, linger, batch size, compression, in-flight requests).
 *
 * Usage:
 *   CopyLoop <sourceBootstrap> <targetBootstrap> <topic> <remoteTopic> <count> <producer.properties>
 *
 * count > 0: stop after copying that many records (every one acknowledged), then exit 0.
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
import java.util.concurrent.CountDownLatch;
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

    private CopyLoop() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: CopyLoop <sourceBootstrap> <targetBootstrap> <topic> <remoteTopic> <count> "
                + "<producer.properties>");
            System.exit(2);
        }
        long count = Long.parseLong(args[4]);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(args[0]));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(args[1], args[5]));
        CountDownLatch finished = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                finished.await();
            } catch (InterruptedException e) {
                main.interrupt();
            }
        }));
        AtomicReference<Exception> failure = new AtomicReference<>();
        long copied = 0;
        try {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(args[2])) {
                partitions.add(new TopicPartition(p.topic(), p.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            String remote = args[3];
            while (count <= 0 || copied < count) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(
                        new ProducerRecord<>(remote, r.partition(), r.timestamp(), r.key(), r.value(), r.headers()),
                        (metadata, error) -> {
                            if (error != null) {
                                failure.compareAndSet(null, error);
                            }
                        });
                }
                copied += records.count();
                if (failure.get() != null) {
                    break;
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: stop reading, deliver what was sent.
        } finally {
            producer.flush();
            producer.close();
            consumer.close();
            finished.countDown();
        }
        if (failure.get() != null) {
            failure.get().printStackTrace();
            System.exit(1);
        }
        System.out.println("copied " + copied);
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
