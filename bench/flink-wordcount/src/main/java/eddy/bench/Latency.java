package eddy.bench;

import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.SinkFunction;
import org.apache.flink.streaming.api.functions.source.SourceFunction;
import org.apache.flink.util.Collector;

import java.util.Arrays;
import java.util.regex.Pattern;

/**
 * Flink end-to-end latency peer of `eddy stream latency`.
 *
 * A source emits lines "<emit-nanos> word word ..." at RATE lines/s; flatMap
 * splits each line into (emit-nanos, word) strings; a regex filter keeps
 * words matching [a-m].*; the sink records now - emit for every word that
 * passes. Usage: Latency [RATE] [SECONDS] [PARALLELISM] [BUFFER_TIMEOUT_MS]
 * (Flink's default buffer timeout is 100 ms; pass 1 to match Eddy's default).
 * Prints p50/p99/p99.9/max in ms.
 */
public class Latency {
    static final int MAX = 10_000_000;
    static final long[] LAT = new long[MAX];
    static int n = 0;

    public static void main(String[] args) throws Exception {
        int rate = args.length > 0 ? Integer.parseInt(args[0]) : 40000;
        int seconds = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        int parallelism = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        if (args.length > 3) env.setBufferTimeout(Long.parseLong(args[3]));
        env.addSource(new RateSource(rate, seconds)).setParallelism(1)
            .flatMap(new FlatMapFunction<String, String>() {
                @Override
                public void flatMap(String line, Collector<String> out) {
                    String[] parts = line.split(" ");
                    for (int i = 1; i < parts.length; i++) out.collect(parts[0] + " " + parts[i]);
                }
            })
            .filter(new FilterFunction<String>() {
                final Pattern p = Pattern.compile("^\\d+ [a-m][a-z]*$");
                @Override
                public boolean filter(String s) { return p.matcher(s).matches(); }
            })
            .addSink(new SinkFunction<String>() {
                @Override
                public void invoke(String s, Context ctx) {
                    long emit = Long.parseLong(s.substring(0, s.indexOf(' ')));
                    long lat = System.nanoTime() - emit;
                    synchronized (LAT) { if (n < MAX) LAT[n++] = lat; }
                }
            }).setParallelism(1);
        env.execute("flink-latency");
        long[] v;
        synchronized (LAT) { v = Arrays.copyOf(LAT, n); }
        Arrays.sort(v);
        System.out.printf("flink latency rate=%d seconds=%d samples=%d p50=%.3fms p99=%.3fms p999=%.3fms max=%.3fms%n",
            rate, seconds, v.length, pct(v, 0.50), pct(v, 0.99), pct(v, 0.999), v.length == 0 ? 0.0 : v[v.length - 1] / 1e6);
    }

    static double pct(long[] v, double q) {
        if (v.length == 0) return 0.0;
        return v[Math.min(v.length - 1, (int) (q * v.length))] / 1e6;
    }

    static final class RateSource implements SourceFunction<String> {
        final int rate; final int seconds; volatile boolean running = true;
        RateSource(int rate, int seconds) { this.rate = rate; this.seconds = seconds; }
        @Override
        public void run(SourceContext<String> ctx) throws Exception {
            String[] words = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
                "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"};
            long start = System.nanoTime();
            long total = (long) rate * seconds;
            for (long i = 0; i < total && running; i++) {
                long due = start + i * 1_000_000_000L / rate;
                long now;
                while ((now = System.nanoTime()) < due) {
                    if (due - now > 200_000) Thread.sleep(0, 100_000); else Thread.onSpinWait();
                }
                StringBuilder sb = new StringBuilder();
                sb.append(System.nanoTime());
                for (int k = 0; k < 4; k++) sb.append(' ').append(words[(int) ((i * 7 + k * 13) % words.length)]);
                synchronized (ctx.getCheckpointLock()) { ctx.collect(sb.toString()); }
            }
        }
        @Override
        public void cancel() { running = false; }
    }
}
