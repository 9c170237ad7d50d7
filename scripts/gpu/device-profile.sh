#!/usr/bin/env bash
# Sampling profiler for the device machine (it has no perf): runs the check on
# SSB SF1 in memory for one query (ONLY=Q2.1) and samples every thread's stack
# with cuda-gdb SAMPLES times, then counts the hottest eddy_gpu frames.
# Prepared like scripts/gpu/device-run.sh (copy to .gpucheck/prof.sh).
set -u
mkdir -p /tmp/b
xz -dc .gpucheck/eddy-bench.xz > /tmp/b/eddy-bench; xz -dc .gpucheck/egc.xz > /tmp/b/egc; chmod +x /tmp/b/*
/tmp/b/eddy-bench gen ssb --sf 1 --data /tmp/ssb >/dev/null 2>&1
L=$(mktemp -d); ln -s /usr/local/cuda/lib64/libnvrtc.so.13 $L/libnvrtc.so
export LD_LIBRARY_PATH=$L:/usr/local/cuda/lib64 RUST_LOG=warn
/tmp/b/egc --data /tmp/ssb/ssb-sf1 --runs ${RUNS:-30} --memory --only ${ONLY:-Q2.1} > $OUT/prof-run.log 2>&1 &
PID=$!
sleep ${DELAY:-12}
for i in $(seq 1 ${SAMPLES:-12}); do
  kill -0 $PID 2>/dev/null || break
  timeout 20 cuda-gdb -p $PID -batch -ex "set pagination off" -ex "thread apply all bt 40" >> $OUT/samples.txt 2>/dev/null
  echo "=== sample $i" >> $OUT/samples.txt
  sleep 0.5
done
wait $PID
tail -5 $OUT/prof-run.log
python3 - <<'PY'
import re, collections, os
txt=open(os.environ['OUT']+'/samples.txt').read()
threads=re.split(r'\nThread ', txt)
top=collections.Counter(); gpu=collections.Counter()
for t in threads:
    frames=re.findall(r'#\d+\s+(?:0x[0-9a-f]+ in )?([^\s(]+)', t)
    if not frames: continue
    if any('eddy_gpu' in f for f in frames) or any('datafusion' in f for f in frames):
        # first frame that is ours or a library we care about
        sig=[f for f in frames if not re.match(r'^(__|syscall|futex|std::sys|core::|alloc::|clone|start_thread|pthread)', f)]
        top[' <- '.join(x[:70] for x in sig[:4])]+=1
        for f in frames:
            if 'eddy_gpu' in f: gpu[f[:110]]+=1; break
print("TOP STACKS"); [print(c, k) for k,c in top.most_common(25)]
print("FIRST eddy_gpu FRAME"); [print(c, k) for k,c in gpu.most_common(15)]
PY
