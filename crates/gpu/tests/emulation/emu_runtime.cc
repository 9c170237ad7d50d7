// The scheduler behind cuda_emu.h: runs a kernel's grid on one CPU thread,
// each block's threads as fibers (ucontext) switched only at barriers.
// See cuda_emu.h for what is modelled and what is not.
#include <ucontext.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

struct eddy_dim3 { unsigned x, y, z; };

namespace {

enum State { RUN, AT_SYNC, AT_BALLOT, DONE };

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  State state = RUN;
  unsigned mask = 0;     // ballot: the lanes it waits for
  int pred = 0;          // ballot: its predicate
  unsigned result = 0;   // ballot: the word it gets
  eddy_dim3 tid{0, 0, 0};
};

constexpr size_t STACK_BYTES = 256 * 1024;

ucontext_t g_sched;
std::vector<Fiber> g_fibers;
size_t g_cur = 0;
eddy_dim3 g_block{0, 0, 0}, g_bdim{1, 1, 1}, g_gdim{1, 1, 1};
void (*g_body)(void**) = nullptr;
void** g_args = nullptr;
char g_error[512] = {0};

void fiber_main() {
  g_body(g_args);
  g_fibers[g_cur].state = DONE;
  // uc_link returns to the scheduler.
}

void yield_to_scheduler() {
  swapcontext(&g_fibers[g_cur].ctx, &g_sched);
}

}  // namespace

extern "C" const eddy_dim3* eddy_emu_thread_idx() { return &g_fibers[g_cur].tid; }
extern "C" const eddy_dim3* eddy_emu_block_idx() { return &g_block; }
extern "C" const eddy_dim3* eddy_emu_block_dim() { return &g_bdim; }
extern "C" const eddy_dim3* eddy_emu_grid_dim() { return &g_gdim; }

extern "C" unsigned eddy_emu_ballot(unsigned mask, int pred) {
  Fiber& f = g_fibers[g_cur];
  f.state = AT_BALLOT;
  f.mask = mask;
  f.pred = pred;
  yield_to_scheduler();
  return f.result;
}

extern "C" void eddy_emu_syncthreads() {
  g_fibers[g_cur].state = AT_SYNC;
  yield_to_scheduler();
}

extern "C" const char* eddy_emu_last_error() { return g_error; }

// Runs one block; returns 0, or 1 with g_error set.
static int run_block(unsigned threads) {
  for (unsigned t = 0; t < threads; t++) {
    Fiber& f = g_fibers[t];
    f.state = RUN;
    f.tid = eddy_dim3{t, 0, 0};
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = &g_sched;
    makecontext(&f.ctx, fiber_main, 0);
  }
  for (;;) {
    for (unsigned t = 0; t < threads; t++) {
      if (g_fibers[t].state != RUN) continue;
      g_cur = t;
      swapcontext(&g_sched, &g_fibers[t].ctx);
    }
    // Every fiber is now at a barrier or done.
    unsigned done = 0, at_sync = 0, at_ballot = 0;
    for (unsigned t = 0; t < threads; t++) {
      done += g_fibers[t].state == DONE;
      at_sync += g_fibers[t].state == AT_SYNC;
      at_ballot += g_fibers[t].state == AT_BALLOT;
    }
    if (done == threads) return 0;
    bool released = false;
    // Ballots resolve per warp, once every lane of the mask is there.
    for (unsigned w = 0; w * 32 < threads; w++) {
      unsigned base = w * 32, word = 0, waiting = 0, mask = 0;
      bool any = false;
      for (unsigned l = 0; l < 32 && base + l < threads; l++) {
        Fiber& f = g_fibers[base + l];
        if (f.state != AT_BALLOT) continue;
        any = true;
        mask |= f.mask;
        waiting |= 1u << l;
        if (f.pred) word |= 1u << l;
      }
      if (!any) continue;
      for (unsigned l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        if (base + l >= threads || g_fibers[base + l].state == DONE) {
          snprintf(g_error, sizeof g_error,
                   "__ballot_sync: lane %u of warp %u (block %u) exited while its warp waits "
                   "(undefined on the device)", l, w, g_block.x);
          return 1;
        }
      }
      if ((waiting & mask) != mask) continue;  // some lane still at __syncthreads
      for (unsigned l = 0; l < 32; l++) {
        if (!(waiting >> l & 1)) continue;
        Fiber& f = g_fibers[base + l];
        f.result = word & f.mask;
        f.state = RUN;
      }
      released = true;
    }
    if (released) continue;
    if (at_sync > 0 && at_ballot == 0) {
      if (done > 0) {
        snprintf(g_error, sizeof g_error,
                 "__syncthreads: %u of %u threads of block %u exited while the others wait "
                 "(undefined on the device)", done, threads, g_block.x);
        return 1;
      }
      for (unsigned t = 0; t < threads; t++) g_fibers[t].state = RUN;
      continue;
    }
    snprintf(g_error, sizeof g_error,
             "deadlock in block %u: %u threads at __syncthreads, %u at __ballot_sync, %u done",
             g_block.x, at_sync, at_ballot, done);
    return 1;
  }
}

// Runs body(args) as a kernel launch of grid x block threads (1-D).
extern "C" int eddy_emu_run(void (*body)(void**), void** args, unsigned grid, unsigned block) {
  g_error[0] = 0;
  if (block == 0 || grid == 0) {
    snprintf(g_error, sizeof g_error, "empty launch");
    return 1;
  }
  if (g_fibers.size() < block) {
    g_fibers.resize(block);
    for (Fiber& f : g_fibers)
      if (f.stack.empty()) f.stack.resize(STACK_BYTES);
  }
  g_body = body;
  g_args = args;
  g_bdim = eddy_dim3{block, 1, 1};
  g_gdim = eddy_dim3{grid, 1, 1};
  for (unsigned b = 0; b < grid; b++) {
    g_block = eddy_dim3{b, 0, 0};
    if (run_block(block) != 0) return 1;
  }
  return 0;
}
