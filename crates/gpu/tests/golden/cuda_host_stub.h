// Host stand-ins for the CUDA built-ins the generated kernels use, so a
// plain C++ compiler can syntax- and type-check them where no CUDA
// compiler exists (tests/codegen_golden.rs). Never used to run kernels.
#pragma once
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
#define __constant__ static const
#define __launch_bounds__(n)
struct eddy_dim3 { unsigned x, y, z; };
extern eddy_dim3 blockIdx, threadIdx, blockDim, gridDim;
unsigned __ballot_sync(unsigned mask, bool pred);
void __syncthreads();
void __threadfence();
int atomicExch(int* p, int v);
unsigned atomicExch(unsigned* p, unsigned v);
unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v);
unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v);
unsigned long long atomicAdd(unsigned long long* p, unsigned long long v);
double atomicAdd(double* p, double v);
long long atomicMin(long long* p, long long v);
long long atomicMax(long long* p, long long v);
double __longlong_as_double(long long x);
long long __double_as_longlong(double x);
double fmod(double a, double b);
