/*
 * The task transport's JVM: Kafka's Java clients serving the copy tasks' Python workers of one Spark
 * executor (docs/decisions.md, "Java clients as the task's transport"). It decides nothing about a
 * record: every record rule stays in Python (pipeline/executor/sink.py); this moves bytes between the
 * clusters and a task's Python, and says what the clients said.
 *
 * One process per executor, started by its first task (pipeline/transport/launcher.py). It listens
 * on a loopback port and writes "<port> <token>" into the file named by its first argument (0600,
 * replaced in one rename); a connection is one client, a consumer or a producer, and closes it when
 * it closes: a task that ends or dies takes only its own clients with it. The process exits once no
 * connection was open for the number of milliseconds of its second argument.
 *
 * Frames, both ways: a kind byte, the body's length (int) and the body; the kinds and their bodies
 * are listed in pipeline/transport/frames.py, which the conformance test checks against this file.
 * Every number is big-endian; a byte string is an int length (-1: null) and its bytes; a string is
 * a byte string of UTF-8.
 */

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TransportServer {

    /** Connections open (counted from their accept, before the hello). */
    private static final AtomicInteger OPEN = new AtomicInteger();
    private static volatile long lastClosed = System.nanoTime();

    /** The transport's own errors (a refused connection, an unknown frame): librdkafka's _TRANSPORT. */
    static final int ERR_TRANSPORT = -195;
    /** librdkafka's _STATE: a call the client's state does not allow. */
    static final int ERR_STATE = -172;

    private TransportServer() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: TransportServer <port file> <idle exit ms>");
            System.exit(2);
        }
        Path portFile = Paths.get(args[0]);
        long idleExitNanos = Long.parseLong(args[1]) * 1_000_000L;
        byte[] raw = new byte[24];
        new SecureRandom().nextBytes(raw);
        String token = HexFormat.of().formatHex(raw);
        ServerSocket server = new ServerSocket(0, 128, InetAddress.getLoopbackAddress());
        Path partial = portFile.resolveSibling(portFile.getFileName() + "." + ProcessHandle.current().pid());
        Files.deleteIfExists(partial);
        Files.createFile(partial, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(partial, server.getLocalPort() + " " + token + " " + ProcessHandle.current().pid() + "\n");
        Files.move(partial, portFile, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        byte[] key = token.getBytes(StandardCharsets.US_ASCII);
        // Accepting and exiting for idleness in one thread: a connection is counted before the next
        // look at idleness, and one still in the backlog at the exit is refused (its task starts another).
        server.setSoTimeout(1000);
        while (true) {
            Socket socket;
            try {
                socket = server.accept();
            } catch (java.net.SocketTimeoutException e) {
                if (OPEN.get() == 0 && System.nanoTime() - lastClosed > idleExitNanos) {
                    String text = Files.exists(portFile) ? Files.readString(portFile) : "";
                    if (text.endsWith(" " + ProcessHandle.current().pid() + "\n")) {
                        Files.deleteIfExists(portFile);
                    }
                    Runtime.getRuntime().halt(0);
                }
                continue;
            }
            OPEN.incrementAndGet();
            daemon("sparkmirror-transport-session", () -> serve(socket, key));
        }
    }

    static void daemon(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
    }

    /**
     * One connection: first the task's challenge ('C': a nonce), answered with the HMAC of it under the
     * token, so a task sends its settings (credentials among them) only to the JVM that wrote the port
     * file; then its hello ('H': the token, the role and the client's settings); then the session.
     */
    private static void serve(Socket socket, byte[] key) {
        Frames frames = null;
        try (socket) {
            socket.setTcpNoDelay(true);
            frames = new Frames(socket);
            Frames.In challenge = frames.read();
            if (challenge == null || challenge.kind != 'C') {
                return;
            }
            ByteArrayOutputStream proof = new ByteArrayOutputStream();
            Frames.bytes(new DataOutputStream(proof), hmac(key, challenge.bytes()));
            frames.write('C', proof);
            Frames.In hello = frames.read();
            if (hello == null || hello.kind != 'H') {
                return;
            }
            byte[] token = hello.bytes();
            if (token == null || !MessageDigest.isEqual(token, key)) {
                frames.error(-1, ERR_TRANSPORT, false, "_TRANSPORT", "the transport refused the connection: wrong token");
                return;
            }
            char role = (char) hello.body.readByte();
            Properties props = new Properties();
            int n = hello.body.readInt();
            for (int i = 0; i < n; i++) {
                props.put(hello.string(), hello.string());
            }
            if (role == 'C') {
                new ConsumerSession(frames, props).run();
            } else if (role == 'P') {
                new ProducerSession(frames, props).run();
            } else {
                frames.error(-1, ERR_TRANSPORT, true, "_TRANSPORT", "unknown role " + role);
            }
        } catch (IOException e) {
            // the task's end: its socket closed
        } catch (RuntimeException e) {
            // A client that could not be made (its settings), or a session's failure: said to the task
            // (its error names the cause), and in this JVM's log.
            e.printStackTrace();
            if (frames != null) {
                try {
                    Errors error = errorOf(e);
                    frames.error(-1, error == Errors.UNKNOWN_SERVER_ERROR ? ERR_TRANSPORT : error.code(), true,
                        error == Errors.UNKNOWN_SERVER_ERROR ? "_TRANSPORT" : error.name(), describe(e));
                } catch (IOException | RuntimeException ignored) {
                    // the connection is gone too
                }
            }
        } finally {
            lastClosed = System.nanoTime();
            OPEN.decrementAndGet();
        }
    }

    static byte[] hmac(byte[] key, byte[] nonce) {
        try {
            javax.crypto.Mac mac = javax.crypto.Mac.getInstance("HmacSHA256");
            mac.init(new javax.crypto.spec.SecretKeySpec(key, "HmacSHA256"));
            return mac.doFinal(nonce == null ? new byte[0] : nonce);
        } catch (java.security.GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    /** An exception's Kafka error: its code (librdkafka's for the same broker error) and name. */
    static Errors errorOf(Throwable e) {
        if (e.getClass() == KafkaException.class && e.getMessage() != null && e.getMessage().contains("part of a batch")) {
            // A record the broker did not refuse, in a produce batch it refused for another record (the
            // partition's error is INVALID_RECORD): librdkafka fails the whole batch with that error, and
            // the sink's rules treat each record of it alike (docs/faults.md).
            return Errors.INVALID_RECORD;
        }
        Throwable t = e;
        while (t instanceof KafkaException && !(t instanceof org.apache.kafka.common.errors.ApiException)
                && t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return Errors.forException(t);
    }

    static String describe(Throwable e) {
        String text = e.getClass().getSimpleName() + ": " + e.getMessage();
        Throwable cause = e.getCause();
        if (cause != null && cause != e && cause.getMessage() != null) {
            text += " (" + cause.getMessage() + ")";
        }
        return text;
    }

    /** One connection's frames: reads by one thread, writes by any (one frame at a time). */
    static final class Frames {
        private final DataInputStream in;
        private final DataOutputStream out;

        Frames(Socket socket) throws IOException {
            in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 1 << 16));
            out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), 1 << 16));
        }

        static final class In {
            final char kind;
            final DataInputStream body;

            In(char kind, byte[] body) {
                this.kind = kind;
                this.body = new DataInputStream(new java.io.ByteArrayInputStream(body));
            }

            byte[] bytes() throws IOException {
                int n = body.readInt();
                if (n < 0) {
                    return null;
                }
                byte[] b = new byte[n];
                body.readFully(b);
                return b;
            }

            String string() throws IOException {
                byte[] b = bytes();
                return b == null ? null : new String(b, StandardCharsets.UTF_8);
            }
        }

        /** The next frame, or null at the end of the stream. */
        In read() throws IOException {
            int kind;
            try {
                kind = in.readUnsignedByte();
            } catch (EOFException e) {
                return null;
            }
            byte[] body = new byte[in.readInt()];
            in.readFully(body);
            return new In((char) kind, body);
        }

        void write(char kind, ByteArrayOutputStream body) throws IOException {
            synchronized (out) {
                out.writeByte(kind);
                out.writeInt(body.size());
                body.writeTo(out);
                out.flush();
            }
        }

        /** An 'X' frame: an error of a partition (its id) or of the client as a whole (-1). */
        void error(int id, int code, boolean fatal, String name, String message) throws IOException {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            DataOutputStream o = new DataOutputStream(buf);
            o.writeInt(id);
            o.writeInt(code);
            o.writeByte(fatal ? 1 : 0);
            string(o, name);
            string(o, message);
            write('X', buf);
        }

        static void bytes(DataOutputStream o, byte[] b) throws IOException {
            if (b == null) {
                o.writeInt(-1);
                return;
            }
            o.writeInt(b.length);
            o.write(b);
        }

        static void string(DataOutputStream o, String s) throws IOException {
            bytes(o, s == null ? null : s.getBytes(StandardCharsets.UTF_8));
        }
    }

    /**
     * A source consumer. Its frames from Python are commands (define, assign, unassign, pause, resume,
     * seek) and credits; each 'R' frame it sends spends a credit, so at most that many polls' records
     * wait in the socket and in Python. Commands run on the polling thread (the consumer is not
     * thread-safe), which they wake.
     */
    static final class ConsumerSession {
        /** Milliseconds between two looks at every assigned partition's position and end. */
        private static final long SWEEP_MS = 1000;
        /** The longest a poll waits (commands wake it at once). */
        private static final Duration POLL = Duration.ofMillis(500);

        private final Frames frames;
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final boolean eof;
        private final Map<Integer, TopicPartition> byId = new HashMap<>();
        private final Map<TopicPartition, Integer> ids = new HashMap<>();
        private final ConcurrentLinkedQueue<Frames.In> commands = new ConcurrentLinkedQueue<>();
        private final Object credit = new Object();
        private int credits;
        private volatile boolean closing;
        /** What Python was last told of each partition: its position and end, and where its end was said. */
        private final Map<TopicPartition, long[]> told = new HashMap<>();
        private final Map<TopicPartition, Long> eofAt = new HashMap<>();
        /** How many assign and seek frames ran: each 'R' frame says it, so Python knows which of its
         * records were fetched before a move it asked for. */
        private int moves;
        /** Partitions the consumer failed (out of range): paused until Python seeks them again. */
        private final Set<TopicPartition> failed = new HashSet<>();

        ConsumerSession(Frames frames, Properties props) {
            this.frames = frames;
            this.eof = "true".equals(props.remove("sparkmirror.transport.partition.eof"));
            props.put("key.deserializer", ByteArrayDeserializer.class.getName());
            props.put("value.deserializer", ByteArrayDeserializer.class.getName());
            this.consumer = new KafkaConsumer<>(props);
        }

        void run() throws IOException {
            daemon("sparkmirror-transport-commands", this::readCommands);
            frames.write('H', new ByteArrayOutputStream());
            long nextSweep = 0;
            try {
                while (!closing) {
                    runCommands();
                    long now = System.currentTimeMillis();
                    boolean sweep = now >= nextSweep;
                    if (sweep) {
                        nextSweep = now + SWEEP_MS;
                    }
                    boolean assigned = !consumer.assignment().isEmpty();
                    if (!assigned || !hasCredit()) {
                        if (assigned && sweep) {
                            send(ConsumerRecords.empty(), true);
                        }
                        synchronized (credit) {  // nothing assigned or no credit: until a command or credit
                            if (commands.isEmpty() && !closing) {
                                credit.wait(200);
                            }
                        }
                        continue;
                    }
                    ConsumerRecords<byte[], byte[]> records;
                    try {
                        records = consumer.poll(POLL);
                    } catch (WakeupException e) {
                        continue;
                    } catch (OffsetOutOfRangeException e) {
                        for (TopicPartition tp : e.offsetOutOfRangePartitions().keySet()) {
                            failed.add(tp);
                            consumer.pause(List.of(tp));
                            Integer id = ids.get(tp);
                            frames.error(id == null ? -1 : id, Errors.OFFSET_OUT_OF_RANGE.code(), false,
                                "OFFSET_OUT_OF_RANGE", describe(e));
                        }
                        continue;
                    } catch (KafkaException e) {
                        Errors error = errorOf(e);
                        boolean fatal = e instanceof AuthenticationException || e instanceof AuthorizationException;
                        frames.error(-1, error.code(), fatal, error.name(), describe(e));
                        sleep(fatal ? 1000 : 200);
                        continue;
                    }
                    if (!records.isEmpty() || sweep) {
                        send(records, sweep);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                consumer.close(Duration.ZERO);
            }
        }

        private boolean hasCredit() {
            synchronized (credit) {
                return credits > 0;
            }
        }

        private static void sleep(long ms) {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        /** The commands' thread: queue each for the polling thread and wake it. */
        private void readCommands() {
            try {
                while (true) {
                    Frames.In f = frames.read();
                    if (f == null) {
                        break;
                    }
                    if (f.kind == 'N') {
                        synchronized (credit) {
                            credits += f.body.readInt();
                            credit.notifyAll();
                        }
                        continue;
                    }
                    commands.add(f);
                    synchronized (credit) {
                        credit.notifyAll();
                    }
                    consumer.wakeup();
                }
            } catch (IOException e) {
                // closed
            }
            closing = true;
            synchronized (credit) {
                credit.notifyAll();
            }
            consumer.wakeup();
        }

        private void runCommands() throws IOException {
            Frames.In f;
            while ((f = commands.poll()) != null) {
                int n = f.body.readInt();
                List<TopicPartition> tps = new ArrayList<>(n);
                switch (f.kind) {
                    case 'T':
                        for (int i = 0; i < n; i++) {
                            int id = f.body.readInt();
                            TopicPartition tp = new TopicPartition(f.string(), f.body.readInt());
                            byId.put(id, tp);
                            ids.put(tp, id);
                        }
                        break;
                    case 'A':
                    case 'K': {
                        moves++;
                        Map<TopicPartition, Long> offsets = new HashMap<>();
                        for (int i = 0; i < n; i++) {
                            TopicPartition tp = byId.get(f.body.readInt());
                            offsets.put(tp, f.body.readLong());
                        }
                        if (f.kind == 'A') {  // the assignment, in place of the last (a reused consumer)
                            consumer.assign(offsets.keySet());
                            told.clear();
                            eofAt.clear();
                            failed.clear();
                        }
                        for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
                            consumer.seek(e.getKey(), e.getValue());
                            told.remove(e.getKey());
                            eofAt.remove(e.getKey());
                            if (failed.remove(e.getKey())) {
                                consumer.resume(List.of(e.getKey()));
                            }
                        }
                        break;
                    }
                    case 'U': {
                        for (int i = 0; i < n; i++) {
                            tps.add(byId.get(f.body.readInt()));
                        }
                        Set<TopicPartition> all = new HashSet<>(consumer.assignment());
                        tps.forEach(all::remove);
                        consumer.assign(all);
                        tps.forEach(told::remove);
                        break;
                    }
                    case 'S':
                    case 'G':
                        for (int i = 0; i < n; i++) {
                            tps.add(byId.get(f.body.readInt()));
                        }
                        tps.retainAll(consumer.assignment());
                        if (f.kind == 'S') {
                            consumer.pause(tps);
                        } else {
                            tps.removeAll(failed);
                            consumer.resume(tps);
                        }
                        break;
                    default:
                        frames.error(-1, ERR_TRANSPORT, true, "_TRANSPORT", "unknown consumer frame " + f.kind);
                }
            }
        }

        /**
         * An 'R' frame: the assign and seek frames run so far; the poll's records, partition by partition; then the position and end of the partitions that had
         * records (of every assigned partition on a sweep) where they changed since last said; then
         * the ends reached (partition EOF, when asked for), once per position.
         */
        private void send(ConsumerRecords<byte[], byte[]> records, boolean sweep) throws IOException {
            ByteArrayOutputStream buf = new ByteArrayOutputStream(records.isEmpty() ? 256 : 1 << 16);
            DataOutputStream o = new DataOutputStream(buf);
            o.writeInt(moves);
            Set<TopicPartition> read = records.partitions();
            o.writeInt(read.size());
            for (TopicPartition tp : read) {  // each partition's records together: Python groups nothing
                List<ConsumerRecord<byte[], byte[]>> run = records.records(tp);
                o.writeInt(ids.get(tp));
                o.writeInt(run.size());
                for (ConsumerRecord<byte[], byte[]> r : run) {
                    o.writeLong(r.offset());
                    o.writeLong(r.timestamp());
                    Frames.bytes(o, r.key());
                    Frames.bytes(o, r.value());
                    Header[] headers = r.headers().toArray();
                    o.writeInt(headers.length);
                    for (Header h : headers) {
                        Frames.string(o, h.key());
                        Frames.bytes(o, h.value());
                    }
                }
            }
            Set<TopicPartition> look = sweep ? consumer.assignment() : read;
            ByteArrayOutputStream posBuf = new ByteArrayOutputStream();
            DataOutputStream p = new DataOutputStream(posBuf);
            ByteArrayOutputStream eofBuf = new ByteArrayOutputStream();
            DataOutputStream e = new DataOutputStream(eofBuf);
            int positions = 0;
            int ends = 0;
            Set<TopicPartition> paused = consumer.paused();
            for (TopicPartition tp : look) {
                Integer id = ids.get(tp);
                if (id == null || failed.contains(tp)) {
                    continue;
                }
                long position;
                try {
                    position = consumer.position(tp, Duration.ZERO);
                } catch (KafkaException ex) {
                    continue;  // not known yet
                }
                OptionalLong lag = consumer.currentLag(tp);
                long end = lag.isPresent() ? position + lag.getAsLong() : -1;
                long[] before = told.get(tp);
                if (before == null || before[0] != position || before[1] != end) {
                    told.put(tp, new long[] {position, end});
                    p.writeInt(id);
                    p.writeLong(position);
                    p.writeLong(end);
                    positions++;
                }
                if (eof && end >= 0 && position >= end && !paused.contains(tp)) {
                    Long at = eofAt.get(tp);
                    if (at == null || at != position) {
                        eofAt.put(tp, position);
                        e.writeInt(id);
                        e.writeLong(position);
                        ends++;
                    }
                }
            }
            if (records.isEmpty() && positions == 0 && ends == 0) {
                return;
            }
            o.writeInt(positions);
            posBuf.writeTo(o);
            o.writeInt(ends);
            eofBuf.writeTo(o);
            if (!records.isEmpty()) {
                synchronized (credit) {
                    credits--;
                }
            }
            frames.write('R', buf);
        }
    }

    /**
     * A producer. Python's 'P' frames are records to send, each to a partition defined by a 'T'
     * frame (partition -1: the Java partitioner's choice); each partition's records are numbered from 0 in
     * the order sent, and 'A' frames
     * acknowledge runs of them: (id, first number, count, first target offset, error).
     */
    static final class ProducerSession {
        private final Frames frames;
        private final KafkaProducer<byte[], byte[]> producer;
        private final Map<Integer, TopicPartition> byId = new HashMap<>();
        private final Map<Integer, long[]> numbers = new HashMap<>();
        private final LinkedBlockingQueue<Object[]> acks = new LinkedBlockingQueue<>();
        private static final Object[] END = new Object[0];
        /** An entry of {@link #acks} that is a reply to write as it is, after the acknowledgements before it. */
        private static final String REPLY = "reply";
        /** The group whose offsets a transaction commits (exactly once: the flow's progress group). */
        private final String group;
        /** The last transaction call that succeeded ('I', 'B', 'C' or 'Z'): a call repeated after its
         * answer was given up on by Python, and that had succeeded meanwhile, succeeds again. */
        private char done;

        ProducerSession(Frames frames, Properties props) {
            this.frames = frames;
            this.group = (String) props.remove("sparkmirror.transport.group.id");
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            this.producer = new KafkaProducer<>(props);
        }

        void run() throws IOException {
            Thread writer = new Thread(this::writeAcks, "sparkmirror-transport-acks");
            writer.setDaemon(true);
            writer.start();
            frames.write('H', new ByteArrayOutputStream());
            try {
                while (true) {
                    Frames.In f = frames.read();
                    if (f == null) {
                        break;
                    }
                    int n = f.body.readInt();
                    if (f.kind == 'T') {
                        for (int i = 0; i < n; i++) {
                            int id = f.body.readInt();
                            byId.put(id, new TopicPartition(f.string(), f.body.readInt()));
                            numbers.put(id, new long[] {0});
                        }
                    } else if (f.kind == 'P') {
                        for (int i = 0; i < n; i++) {
                            send(f);
                        }
                    } else if (f.kind == 'Q') {
                        request(n, f);
                    } else {
                        frames.error(-1, ERR_TRANSPORT, true, "_TRANSPORT", "unknown producer frame " + f.kind);
                    }
                }
            } finally {
                producer.close(Duration.ZERO);
                acks.add(END);
            }
        }

        /**
         * A request (the body's first int is its number): 'I' init, 'B' begin, 'O' send offsets, 'C'
         * commit, 'Z' abort a transaction, 'M' a topic's metadata. Its 'Q' answer goes out after every
         * acknowledgement queued before it.
         */
        private void request(int number, Frames.In f) throws IOException {
            char op = (char) f.body.readByte();
            ByteArrayOutputStream payload = new ByteArrayOutputStream();
            DataOutputStream p = new DataOutputStream(payload);
            Exception error = null;
            try {
                switch (op) {
                    case 'I':
                        if (done == 0) {
                            producer.initTransactions();
                        }
                        break;
                    case 'B':
                        producer.beginTransaction();
                        break;
                    case 'O': {
                        Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> offsets = new HashMap<>();
                        int n = f.body.readInt();
                        for (int i = 0; i < n; i++) {
                            TopicPartition tp = new TopicPartition(f.string(), f.body.readInt());
                            offsets.put(tp, new org.apache.kafka.clients.consumer.OffsetAndMetadata(f.body.readLong()));
                        }
                        producer.sendOffsetsToTransaction(offsets, new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
                        break;
                    }
                    case 'C':
                    case 'Z':
                        if (done != op) {
                            if (op == 'C') {
                                producer.commitTransaction();
                            } else {
                                producer.abortTransaction();
                            }
                        }
                        break;
                    case 'M': {
                        List<org.apache.kafka.common.PartitionInfo> parts = producer.partitionsFor(f.string());
                        Map<Integer, org.apache.kafka.common.Node> nodes = new HashMap<>();
                        p.writeInt(parts.size());
                        for (org.apache.kafka.common.PartitionInfo info : parts) {
                            p.writeInt(info.partition());
                            p.writeInt(info.leader() == null ? -1 : info.leader().id());
                            org.apache.kafka.common.Node[] isr = info.inSyncReplicas();
                            p.writeInt(isr.length);
                            for (org.apache.kafka.common.Node node : isr) {
                                p.writeInt(node.id());
                                nodes.put(node.id(), node);
                            }
                            if (info.leader() != null) {
                                nodes.put(info.leader().id(), info.leader());
                            }
                        }
                        p.writeInt(nodes.size());
                        for (org.apache.kafka.common.Node node : nodes.values()) {
                            p.writeInt(node.id());
                            Frames.string(p, node.host());
                            p.writeInt(node.port());
                        }
                        break;
                    }
                    default:
                        throw new IllegalArgumentException("unknown request " + op);
                }
                if (op != 'M' && op != 'O') {
                    done = op;
                }
            } catch (RuntimeException e) {
                error = e;
            }
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            DataOutputStream o = new DataOutputStream(buf);
            o.writeInt(number);
            if (error == null) {
                o.writeInt(0);
                o.writeByte(0);
                Frames.string(o, "");
                Frames.string(o, "");
                payload.writeTo(o);
            } else {
                Errors e = errorOf(error);
                boolean fatal = error instanceof org.apache.kafka.common.errors.ProducerFencedException
                    || error instanceof org.apache.kafka.common.errors.InvalidProducerEpochException
                    || error instanceof org.apache.kafka.common.errors.OutOfOrderSequenceException
                    || error instanceof org.apache.kafka.common.errors.UnsupportedVersionException
                    || error instanceof AuthorizationException || error instanceof AuthenticationException;
                boolean retriable = error instanceof org.apache.kafka.common.errors.RetriableException;
                boolean illegal = error instanceof IllegalStateException || error instanceof IllegalArgumentException;
                int code = illegal ? ERR_STATE : (e == Errors.UNKNOWN_SERVER_ERROR && !(error instanceof org.apache.kafka.common.errors.ApiException)
                    ? ERR_TRANSPORT : e.code());
                // flags: 1 fatal, 2 retriable, 4 the transaction must be aborted
                int flags = (fatal ? 1 : 0) | (retriable ? 2 : 0) | (!fatal && !retriable && !illegal ? 4 : 0);
                o.writeInt(code);
                o.writeByte(flags);
                Frames.string(o, illegal ? "_STATE" : e.name());
                Frames.string(o, describe(error));
            }
            acks.add(new Object[] {REPLY, buf});
        }

        private void send(Frames.In f) throws IOException {
            int id = f.body.readInt();
            long timestamp = f.body.readLong();
            byte[] key = f.bytes();
            byte[] value = f.bytes();
            int count = f.body.readInt();
            RecordHeaders headers = new RecordHeaders();
            for (int h = 0; h < count; h++) {
                headers.add(f.string(), f.bytes());
            }
            TopicPartition tp = byId.get(id);
            long number = numbers.get(id)[0]++;
            try {
                producer.send(
                    new ProducerRecord<>(tp.topic(), tp.partition() < 0 ? null : tp.partition(),
                        timestamp > 0 ? timestamp : null, key, value, headers),
                    (metadata, error) -> acks.add(new Object[] {id, number, error == null ? metadata.offset() : -1L, error}));
            } catch (KafkaException e) {
                acks.add(new Object[] {id, number, -1L, e});
            }
        }

        /** Acknowledgements as they come, consecutive ones of a partition as one run. */
        private void writeAcks() {
            List<Object[]> batch = new ArrayList<>();
            try {
                while (true) {
                    batch.add(acks.take());
                    acks.drainTo(batch);
                    ByteArrayOutputStream buf = new ByteArrayOutputStream(64 + 24 * batch.size());
                    DataOutputStream o = new DataOutputStream(buf);
                    int runs = 0;
                    ByteArrayOutputStream body = new ByteArrayOutputStream(64 + 24 * batch.size());
                    DataOutputStream b = new DataOutputStream(body);
                    boolean end = false;
                    int i = 0;
                    while (i < batch.size()) {
                        Object[] a = batch.get(i);
                        if (a == END) {
                            end = true;
                            break;
                        }
                        if (a.length == 2 && a[0] == REPLY) {  // the acknowledgements so far first, then it
                            if (runs > 0) {
                                o.writeInt(runs);
                                body.writeTo(o);
                                frames.write('A', buf);
                                buf.reset();
                                body.reset();
                                runs = 0;
                            }
                            frames.write('Q', (ByteArrayOutputStream) a[1]);
                            i++;
                            continue;
                        }
                        int id = (Integer) a[0];
                        long first = (Long) a[1];
                        long offset = (Long) a[2];
                        Exception error = (Exception) a[3];
                        int count = 1;
                        if (error == null) {
                            while (i + count < batch.size()) {
                                Object[] next = batch.get(i + count);
                                if (next == END || next.length == 2 || (Integer) next[0] != id || (Long) next[1] != first + count
                                        || next[3] != null || (Long) next[2] != offset + count) {
                                    break;
                                }
                                count++;
                            }
                        }
                        b.writeInt(id);
                        b.writeLong(first);
                        b.writeInt(count);
                        b.writeLong(offset);
                        if (error == null) {
                            b.writeInt(0);
                        } else {
                            Errors e = errorOf(error);
                            b.writeInt(e == Errors.NONE ? Errors.UNKNOWN_SERVER_ERROR.code() : e.code());
                            Frames.string(b, describe(error));
                        }
                        runs++;
                        i += count;
                    }
                    if (runs > 0) {
                        o.writeInt(runs);
                        body.writeTo(o);
                        frames.write('A', buf);
                    }
                    if (end) {
                        return;
                    }
                    batch.clear();
                }
            } catch (IOException | InterruptedException e) {
                // the connection closed: nobody waits for these any more
            }
        }
    }
}
