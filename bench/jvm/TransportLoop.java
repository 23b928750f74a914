/*
 * The Java half of bench/transport_loop.py: Kafka's Java clients as a transport only, with a Python
 * process deciding what to write. It measures whether a copy task that reads and writes through the
 * Java clients (fetch sessions, one produce request for all partitions of a broker) but keeps every
 * record rule in Python can copy at MirrorMaker 2's latency (docs/decisions.md, "Java clients as the
 * task's transport").
 *
 * Each task has one consumer (assigned, read_committed, from the earliest offset) and one producer.
 * Its stream to Python (stdout, or its socket) and from Python (stdin, or the socket) carry frames of
 * a type byte, a length (int) and a body:
 *   to Python   'R' <n> then n x {pair:int offset:long timestamp:long key value headers}  records read
 *   to Python   'A' <n> then n x {seq:long offset:long}                                 acknowledgements
 *   from Python 'P' <n> then n x {seq:long pair:int timestamp:long key value headers}   records to write
 * where a byte string is an int length (-1: null) and its bytes, headers an int count and that many
 * (key, value) byte strings, and pair the line number in the assignment file. Each line of that file
 * is "<topic> <partition> <remote topic>": read from the first two, write to the remote topic's
 * partition of the same number.
 *
 * Usage: TransportLoop <sourceBootstrap> <targetBootstrap> <assignment file> <producer.properties>
 *        TransportLoop --listen <sourceBootstrap> <targetBootstrap> <producer.properties>
 * The first form is one task's JVM, over its stdin and stdout. The second is one JVM for all tasks:
 * each task connects to the loopback port it prints, sends its assignment file's path and then the
 * same frames. Logs must go to stderr (the bench's log4j2 file does so): stdout carries frames.
 * Exits: 0 at the end of any task's input (in the shared JVM too: a probe, not isolation); 4 a failed
 * send; 3, 5, 6 a broken stream; 2 usage; the error on stderr.
 */

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TransportLoop {

    private final DataOutputStream out;
    private final InputStream in;
    private final List<TopicPartition> sources = new ArrayList<>();
    private final List<TopicPartition> targets = new ArrayList<>();
    private final Map<TopicPartition, Integer> pairs = new HashMap<>();
    private final LinkedBlockingQueue<long[]> acks = new LinkedBlockingQueue<>();

    private TransportLoop(String assignment, InputStream in, OutputStream out) throws IOException {
        this.in = in;
        this.out = new DataOutputStream(new BufferedOutputStream(out, 1 << 16));
        for (String line : Files.readAllLines(Paths.get(assignment))) {
            String[] f = line.split(" ");
            TopicPartition source = new TopicPartition(f[0], Integer.parseInt(f[1]));
            pairs.put(source, sources.size());
            sources.add(source);
            targets.add(new TopicPartition(f[2], source.partition()));
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 4 && args[0].equals("--listen")) {
            listen(args[1], args[2], args[3]);
            return;
        }
        if (args.length != 4) {
            System.err.println("usage: TransportLoop <sourceBootstrap> <targetBootstrap> <assignment> <producer.properties>\n"
                + "       TransportLoop --listen <sourceBootstrap> <targetBootstrap> <producer.properties>");
            System.exit(2);
        }
        new TransportLoop(args[2], System.in, new FileOutputStream(FileDescriptor.out)).run(args[0], args[1], args[3]);
    }

    /**
     * One JVM for every task: a loopback port (printed as the first line of stdout) where each task
     * connects, sends its assignment file's path (writeUTF) and then speaks the frames above.
     */
    private static void listen(String source, String target, String producerFile) throws IOException {
        ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        System.out.println(server.getLocalPort());
        System.out.flush();
        while (true) {
            Socket socket = server.accept();
            socket.setTcpNoDelay(true);
            DataInputStream hello = new DataInputStream(socket.getInputStream());
            TransportLoop loop = new TransportLoop(hello.readUTF(), socket.getInputStream(), socket.getOutputStream());
            daemon("read", () -> {
                try {
                    loop.run(source, target, producerFile);
                } catch (IOException e) {
                    e.printStackTrace();
                    Runtime.getRuntime().halt(6);
                }
            });
        }
    }

    private void run(String source, String target, String producerFile) throws IOException {
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(target, producerFile));
        daemon("acks", this::writeAcks);
        daemon("produce", () -> produce(producer));
        read(new KafkaConsumer<>(consumerProps(source)));
    }

    private static void daemon(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
    }

    /** The task's consumer thread: every poll's records go to Python as one frame. */
    private void read(KafkaConsumer<byte[], byte[]> consumer) throws IOException {
        consumer.assign(sources);
        consumer.seekToBeginning(sources);
        while (true) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
            if (records.isEmpty()) {
                continue;
            }
            ByteArrayOutputStream buf = new ByteArrayOutputStream(1 << 16);
            DataOutputStream o = new DataOutputStream(buf);
            o.writeInt(records.count());
            for (ConsumerRecord<byte[], byte[]> r : records) {
                o.writeInt(pairs.get(new TopicPartition(r.topic(), r.partition())));
                o.writeLong(r.offset());
                o.writeLong(r.timestamp());
                bytes(o, r.key());
                bytes(o, r.value());
                Header[] headers = r.headers().toArray();
                o.writeInt(headers.length);
                for (Header h : headers) {
                    bytes(o, h.key().getBytes(StandardCharsets.UTF_8));
                    bytes(o, h.value());
                }
            }
            frame('R', buf);
        }
    }

    /** Records to write, from Python; each acknowledgement is queued for {@link #writeAcks}. */
    private void produce(KafkaProducer<byte[], byte[]> producer) {
        DataInputStream in = new DataInputStream(new BufferedInputStream(this.in, 1 << 16));
        try {
            while (true) {
                in.readByte();  // 'P'
                in.readInt();   // the body's length
                int n = in.readInt();
                for (int i = 0; i < n; i++) {
                    long seq = in.readLong();
                    TopicPartition target = targets.get(in.readInt());
                    long timestamp = in.readLong();
                    byte[] key = bytes(in);
                    byte[] value = bytes(in);
                    int count = in.readInt();
                    RecordHeaders headers = new RecordHeaders();
                    for (int h = 0; h < count; h++) {
                        headers.add(new String(bytes(in), StandardCharsets.UTF_8), bytes(in));
                    }
                    producer.send(
                        new ProducerRecord<>(target.topic(), target.partition(), timestamp, key, value, headers),
                        (metadata, error) -> {
                            if (error != null) {
                                error.printStackTrace();
                                Runtime.getRuntime().halt(4);
                            }
                            acks.add(new long[] {seq, metadata.offset()});
                        });
                }
            }
        } catch (EOFException e) {
            producer.close();
            Runtime.getRuntime().halt(0);
        } catch (IOException | RuntimeException e) {
            e.printStackTrace();
            Runtime.getRuntime().halt(5);
        }
    }

    /** Acknowledgements as they come, as many per frame as are waiting. */
    private void writeAcks() {
        List<long[]> batch = new ArrayList<>();
        try {
            while (true) {
                batch.add(acks.take());
                acks.drainTo(batch);
                ByteArrayOutputStream buf = new ByteArrayOutputStream(4 + 16 * batch.size());
                DataOutputStream o = new DataOutputStream(buf);
                o.writeInt(batch.size());
                for (long[] ack : batch) {
                    o.writeLong(ack[0]);
                    o.writeLong(ack[1]);
                }
                frame('A', buf);
                batch.clear();
            }
        } catch (IOException | InterruptedException e) {
            e.printStackTrace();
            Runtime.getRuntime().halt(3);
        }
    }

    private void frame(char type, ByteArrayOutputStream body) throws IOException {
        synchronized (out) {
            out.writeByte(type);
            out.writeInt(body.size());
            body.writeTo(out);
            out.flush();
        }
    }

    private static void bytes(DataOutputStream o, byte[] b) throws IOException {
        if (b == null) {
            o.writeInt(-1);
            return;
        }
        o.writeInt(b.length);
        o.write(b);
    }

    private static byte[] bytes(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0) {
            return null;
        }
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    private static Properties consumerProps(String bootstrap) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("isolation.level", "read_committed");
        return props;
    }

    private static Properties producerProps(String bootstrap, String file) throws IOException {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(file)) {
            props.load(in);
        }
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        return props;
    }
}
