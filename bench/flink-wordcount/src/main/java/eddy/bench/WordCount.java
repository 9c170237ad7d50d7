package eddy.bench;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.SinkFunction;
import org.apache.flink.util.Collector;

import java.io.File;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Flink DataStream WordCount, the peer of `eddy stream wordcount`.
 *
 * Usage: WordCount INPUT [PARALLELISM] [batch|streaming]
 * Reads text lines, splits on whitespace, keyBy(word).sum(1), and counts
 * the emitted records in a discarding sink. Prints input MB/s over the job's
 * net runtime (mini-cluster start-up excluded) and the wall time of execute().
 * In batch mode (the default) sum(1) emits one final count per word, like
 * Eddy's reduce_at_end; in streaming mode it emits every update.
 */
public class WordCount {
    static final AtomicLong EMITTED = new AtomicLong();

    public static void main(String[] args) throws Exception {
        String input = args[0];
        int parallelism = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        String mode = args.length > 2 ? args[2] : "batch";
        long bytes = sizeOf(new File(input));

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        env.setRuntimeMode(mode.equals("batch") ? RuntimeExecutionMode.BATCH : RuntimeExecutionMode.STREAMING);

        FileSource<String> source = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(input)).build();
        DataStream<String> text = env.fromSource(source, WatermarkStrategy.noWatermarks(), "file");
        text.flatMap(new Tokenizer())
            .keyBy(t -> t.f0)
            .sum(1)
            .addSink(new SinkFunction<Tuple2<String, Long>>() {
                @Override
                public void invoke(Tuple2<String, Long> value, Context ctx) {
                    EMITTED.incrementAndGet();
                }
            });

        long t0 = System.nanoTime();
        JobExecutionResult result = env.execute("flink-wordcount");
        double wall = (System.nanoTime() - t0) / 1e9;
        // net runtime excludes the local mini-cluster's start-up: the figure we compare
        double secs = result.getNetRuntime() / 1e3;
        System.out.printf("flink wordcount mode=%s parallelism=%d bytes=%d seconds=%.3f MB/s=%.2f wall_seconds=%.3f emitted=%d%n",
            mode, parallelism, bytes, secs, bytes / 1e6 / secs, wall, EMITTED.get());
    }

    static long sizeOf(File f) {
        if (f.isFile()) return f.length();
        long n = 0;
        File[] files = f.listFiles();
        if (files != null) for (File c : files) {
            if (!c.getName().startsWith("_") && !c.getName().startsWith(".")) n += sizeOf(c);
        }
        return n;
    }

    public static final class Tokenizer implements FlatMapFunction<String, Tuple2<String, Long>> {
        @Override
        public void flatMap(String line, Collector<Tuple2<String, Long>> out) {
            int n = line.length();
            int i = 0;
            while (i < n) {
                while (i < n && Character.isWhitespace(line.charAt(i))) i++;
                int s = i;
                while (i < n && !Character.isWhitespace(line.charAt(i))) i++;
                if (i > s) out.collect(new Tuple2<>(line.substring(s, i), 1L));
            }
        }
    }
}
