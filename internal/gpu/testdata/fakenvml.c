/* A stand-in for libnvidia-ml.so.1 with the functions batchfit calls, for
 * nvml_dl_test.go: two GPUs, a compute list longer than the first buffer,
 * a graphics list only in the v1 layout, no MPS list, and the v2 memory
 * query that checks its struct's version as NVML does. */
#include <stdio.h>
#include <string.h>

typedef struct { unsigned long long total, free, used; } mem1;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2;
typedef struct { unsigned int pid; unsigned long long used; } proc1;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc2;

static int inited;
static long devs[2];

int nvmlInit_v2(void) { inited++; return 0; }
int nvmlShutdown(void) { inited--; return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 2; return inited ? 0 : 1; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) {
	if (i >= 2) return 2;
	*h = &devs[i];
	return 0;
}
static int index_of(void *h) { return h == &devs[0] ? 0 : h == &devs[1] ? 1 : -1; }
int nvmlDeviceGetUUID(void *h, char *buf, unsigned int len) {
	return snprintf(buf, len, "GPU-fake-%d", index_of(h)) < (int)len ? 0 : 7;
}
int nvmlDeviceGetName(void *h, char *buf, unsigned int len) {
	return snprintf(buf, len, "NVIDIA Fake %d", index_of(h)) < (int)len ? 0 : 7;
}
int nvmlDeviceGetMemoryInfo(void *h, mem1 *m) {
	m->total = (index_of(h) + 1ULL) << 30; m->used = 5ULL << 20; m->free = m->total - m->used;
	return 0;
}
int nvmlDeviceGetMemoryInfo_v2(void *h, mem2 *m) {
	if (m->version != (sizeof(mem2) | 2u << 24)) return 25; /* ARGUMENT_VERSION_MISMATCH */
	m->total = (index_of(h) + 1ULL) << 30; m->reserved = 1ULL << 20; m->used = 3ULL << 20;
	m->free = m->total - m->used - m->reserved;
	return 0;
}
int nvmlSystemGetDriverVersion(char *buf, unsigned int len) { snprintf(buf, len, "580.82.07"); return 0; }
int nvmlSystemGetCudaDriverVersion(int *v) { *v = 12040; return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count, proc2 *p) {
	unsigned int n = index_of(h) == 0 ? 40 : 0;
	if (*count < n) { *count = n; return 7; }
	for (unsigned int i = 0; i < n; i++) { p[i].pid = 1000 + i; p[i].used = (i + 1ULL) << 20; p[i].gi = p[i].ci = 0xFFFFFFFF; }
	*count = n;
	return 0;
}
int nvmlDeviceGetGraphicsRunningProcesses(void *h, unsigned int *count, proc1 *p) {
	if (index_of(h) != 0) { *count = 0; return 0; }
	if (*count < 2) { *count = 2; return 7; }
	p[0].pid = 1000; p[0].used = 64ULL << 20;          /* also in the compute list */
	p[1].pid = 2000; p[1].used = 0xFFFFFFFFFFFFFFFFULL; /* NVML_VALUE_NOT_AVAILABLE */
	*count = 2;
	return 0;
}
